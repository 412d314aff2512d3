"""A new log identity: a new origin and key for a registry whose tree cannot go on.

A log never signs a checkpoint inconsistent with one it signed (C2SP tlog-checkpoint), so a registry
restored from a backup older than its last published checkpoint, or whose stream was rewritten, cannot
continue its tree: the integrator refuses. The operator then starts a new log, explicitly, with the
registry stopped (``claimlog tlog new-identity --origin ...``):

- the previous log's last checkpoint is the largest one signed by its key among the stored checkpoint,
  the copies the operator gives (a mirror's, an auditor's) and what the configured witnesses hold;
  two of one size with different roots are a fork, and nothing is changed;
- the new log's entry 0 names that checkpoint and the previous key (``events/log_entry.py``,
  ``Predecessor``); the message at stream sequence ``s`` is then entry ``s``, so the new tree commits
  to the whole stream as it now is;
- the tree record is replaced by compare-and-set, the checkpoint, cosignatures and status are cleared,
  and the new tree's tiles go under a prefix of their own: the previous log's tiles stay untouched;
- the new key is written beside the old one first, then the old key file is kept under its key id
  and signs nothing more. A run stopped half-way is finished by running it again.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from nats.aio.client import Client

from events.log_entry import Predecessor
from services.log.tlog_store import TlogStore, TreeRecord
from services.tlog.keys import LogKeyError, create_signer, load_signer
from services.tlog.witnesses import Witness
from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.errors import TlogFormatError, VerificationError
from tlog.note import Ed25519Signer, check_name, open_note
from tlog.vkeys import parse_vkey

TIMEOUT = 5.0


class IdentityRefused(Exception):
    """Why no new log identity was made (nothing was changed)."""


@dataclass(frozen=True)
class NewIdentity:
    record: TreeRecord
    signer: Ed25519Signer
    predecessor: Checkpoint
    sources: list[str]  # where the predecessor checkpoint was found


async def start_new_identity(
    nc: Client, store: TlogStore, key_file: Path, origin: str, *, notes: Sequence[tuple[str, str]] = (),
    witnesses: Sequence[Witness] = (), http: httpx.AsyncClient | None = None,
) -> NewIdentity:
    """Make the tree of ``store`` a new log of ``origin``, succeeding the one it holds; ``notes`` are
    (where, signed note) copies of the previous log's checkpoints the operator has."""
    record = await store.tree()
    if record is None:
        raise IdentityRefused(f"the transparency log of {store.stream} has no tree: a first start makes one, there is nothing to succeed")
    pending = _pending_key(key_file)
    if record.predecessor is not None and pending is not None and pending.vkey() == record.vkey:
        _switch_keys(key_file, pending)  # a run stopped after the record was replaced: finish it
        return NewIdentity(record, pending, predecessor_checkpoint(record.predecessor), ["a run stopped half-way"])
    try:
        check_name(origin, what="origin")
    except TlogFormatError as error:
        raise IdentityRefused(str(error)) from None
    if origin == record.origin:
        raise IdentityRefused(f"{origin} is the current log's origin: a new log identity has a new origin (and key)")
    await _refuse_while_integrating(store)
    found = await _candidates(store, record, notes, witnesses, http)
    note, sources, checkpoint = _last_checkpoint(record, found)
    if pending is not None:
        pending_path(key_file).unlink()  # a new key made by a run that stopped before it replaced the record
    try:
        signer = create_signer(pending_path(key_file), origin)
    except LogKeyError as error:
        raise IdentityRefused(str(error)) from None
    info = await nc.jetstream().stream_info(store.stream)
    successor = TreeRecord(
        origin, signer.vkey(), store.stream, info.created.isoformat() if info.created else "", time.time(),
        predecessor=Predecessor(record.vkey, note), tiles_prefix=f"{signer.key_id:08x}/",
    )
    await store.succeed(successor, record)
    _switch_keys(key_file, signer)
    return NewIdentity(successor, signer, checkpoint, sources)


def pending_path(key_file: Path) -> Path:
    return key_file.with_name(key_file.name + ".new")


def _pending_key(key_file: Path) -> Ed25519Signer | None:
    try:
        return load_signer(pending_path(key_file))
    except LogKeyError:
        return None


def _switch_keys(key_file: Path, signer: Ed25519Signer) -> None:
    """The new key becomes the log key; the old one is kept under its key id (it signs nothing more)."""
    old = load_signer(key_file) if key_file.exists() else None
    if old is not None and old.vkey() != signer.vkey():
        os.replace(key_file, key_file.with_name(f"{key_file.stem}.{old.key_id:08x}.retired{key_file.suffix}"))
    os.replace(pending_path(key_file), key_file)


async def _refuse_while_integrating(store: TlogStore) -> None:
    lease = await store.lease()
    if lease is not None and lease.until > time.time():
        raise IdentityRefused(f"an integrator ({lease.holder}) holds the tree for {lease.until - time.time():.0f} s more: "
                              "stop claimlog (every `claimlog tlog integrate`) first")


async def _candidates(
    store: TlogStore, record: TreeRecord, notes: Sequence[tuple[str, str]], witnesses: Sequence[Witness], http: httpx.AsyncClient | None,
) -> list[tuple[str, str]]:
    """Every copy of the previous log's checkpoints at hand, as (where, note)."""
    found = list(notes)
    stored, _ = await store.checkpoint()
    if stored is not None:
        cosigned = await store.cosigned()
        found.append(("the stored checkpoint", cosigned if cosigned and cosigned.startswith(stored) else stored))
    if witnesses:
        client = http or httpx.AsyncClient(timeout=TIMEOUT)
        try:
            origin_hash = hashlib.sha256(record.origin.encode()).hexdigest()
            for witness in witnesses:
                try:
                    answer = await client.get(f"{witness.url}/{origin_hash}/checkpoint")
                except httpx.HTTPError as error:
                    raise IdentityRefused(f"witness {witness.url} cannot be reached ({error}): the checkpoint it holds may be "
                                          "the previous log's last; try again when it answers") from None
                if answer.status_code == 200:
                    found.append((f"witness {witness.url}", answer.text))
        finally:
            if http is None:
                await client.aclose()
    return found


def _last_checkpoint(record: TreeRecord, found: list[tuple[str, str]]) -> tuple[str, list[str], Checkpoint]:
    """The largest checkpoint signed by the previous log's key, its note and where it was found."""
    key = parse_vkey(record.vkey)
    verified: list[tuple[Checkpoint, str, str]] = []
    for where, note in found:
        try:
            opened, _ = open_note(note, [key])
            checkpoint = parse_checkpoint(opened.text)
        except (VerificationError, TlogFormatError) as error:
            raise IdentityRefused(f"{where} is not a checkpoint signed by the log {record.origin} ({error})") from None
        if checkpoint.origin != record.origin:
            raise IdentityRefused(f"{where} is a checkpoint of {checkpoint.origin}, not of {record.origin}")
        verified.append((checkpoint, note, where))
    if not verified:
        raise IdentityRefused(f"no checkpoint of {record.origin} was found (none stored, none given, no witness holds one): "
                              "give the last one published with --checkpoint FILE")
    for a, _, where_a in verified:
        for b, _, where_b in verified:
            if a.size == b.size and a.root != b.root:
                raise IdentityRefused(f"the log {record.origin} signed two checkpoints of size {a.size} with different roots "
                                      f"({where_a}, {where_b}): a fork; keep both as evidence")
    largest = max(c.size for c, _, _ in verified)
    chosen = [(c, n, w) for c, n, w in verified if c.size == largest]
    checkpoint, note, _ = max(chosen, key=lambda found: found[1].count("\n\u2014 "))  # the copy with the most cosignatures
    return note, [w for _, _, w in chosen], checkpoint


def predecessor_checkpoint(predecessor: Predecessor) -> Checkpoint:
    opened, _ = open_note(predecessor.checkpoint, [parse_vkey(predecessor.vkey)])
    return parse_checkpoint(opened.text)
