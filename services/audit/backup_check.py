"""What a restore checks before anything is switched in: that a backup reads only its own files, that
they are the files its manifest names (their SHA-256, the manifest signed by a key of the backed-up key
registry), and that its log's chains and signatures hold against that key registry as they held when
the backup was made.

A registry's log may hold events that were refused when they were stored (published around the API:
unsigned after the requirement, signed by a key that may not speak for their actor, chained wrong). A
backup records those findings in its manifest; a restore finds them again and refuses any other: an
event edited after the backup was made, its hash recomputed, breaks its claim's chain or its signature.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from events.key_registry import RegistryChangeError, decode_change, fold_registry
from events.subjects import REGISTRY
from services.admission import Gate, Refused, RegistryFact
from services.audit.export import read_export
from services.identity.keys import KeyDocument, attribution_of, document_of
from services.log.chain import event_hash
from services.log.reader import parse_store_time
from services.log.signing import document_signed_by

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # stands for a store time that cannot be read (the gate refuses the event)
KEY_REGISTRY_FILE = "keys.json"  # the backed-up key registry's document, as JSON, beside its bucket's snapshot


class BackupTampered(ValueError):
    """A backup whose files are not what its manifest says, or reach outside it: says which and why."""


def inside(directory: Path, name: object) -> Path:
    """The file ``name`` of the backup, refused when it is not a plain relative path that stays inside it
    (no ``..``, no absolute path, no link leading out)."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name or ".." in Path(name).parts:
        raise BackupTampered(f"the manifest names {name!r}: a backup's files are relative paths inside it")
    root = directory.resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise BackupTampered(f"the manifest names {name!r}, which leads outside the backup (to {path})")
    return path


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def signed_part(manifest: dict) -> bytes:
    """The manifest's bytes a signature covers: every field but the signature, in one canonical form."""
    return json.dumps({k: v for k, v in manifest.items() if k != "signature"}, sort_keys=True, separators=(",", ":")).encode()


def check_files(directory: Path, manifest: dict) -> None:
    """Every file the manifest lists has the SHA-256 it records."""
    for name, expected in manifest.get("files", {}).items():
        if digest(inside(directory, name)) != expected:
            raise BackupTampered(f"{name} is not the file the backup wrote (its SHA-256 differs from the manifest's)")


def check_signature(manifest: dict, document: KeyDocument) -> str | None:
    """The key that signed the manifest, checked against the backed-up key registry; None when unsigned."""
    signed = manifest.get("signature")
    if signed is None:
        return None
    keys = {record.key_id: record for record in document.keys}
    key = keys.get(signed.get("key_id")) if isinstance(signed, dict) else None
    if key is None:
        raise BackupTampered(f"the manifest is signed by key {signed!r}, which the backed-up key registry does not hold")
    if not document_signed_by(key.signing_key().public_key, signed_part(manifest), str(signed.get("signature"))):
        raise BackupTampered(f"the manifest's signature by key {key.key_id} of {key.actor.id} does not verify: it was changed")
    return key.key_id


def logged_registry(path: Path) -> KeyDocument | None:
    """The key registry the exported log's own changes give (None: the log holds none, made before it kept them)."""
    changes = []
    for _, stored in read_export(path):
        if stored.claim_id == REGISTRY:
            try:
                changes.append(decode_change(stored.data))
            except RegistryChangeError:
                continue  # refused by the gate below, by sequence
    try:
        return document_of(fold_registry(changes)) if changes else None
    except RegistryChangeError as error:
        raise BackupTampered(f"{path.name}: the log's key-registry changes do not fold: {error}") from None


def log_findings(path: Path, document: KeyDocument) -> dict[str, str]:
    """Each event of the exported log that the gate refuses against the key registry the log's own changes
    give (``document``, the backed-up bucket, for a log made before it kept them), or whose chain does not
    hold, by sequence."""
    gate = Gate(attribution_of(logged_registry(path) or document))
    heads: dict[str, str] = {}
    found: dict[str, str] = {}
    for seq, stored in read_export(path):
        try:
            stored_at, problem = parse_store_time(stored.stored_at), None
        except ValueError as error:
            stored_at, problem = EPOCH, f"unreadable store time {stored.stored_at[:60]!r}: {error}"
        verdict = gate.judge(seq, f"claims.{stored.claim_id}.{stored.event_type}", stored.data, stored.signature, stored_at, problem)
        event = verdict.event
        if event is None:
            found[str(seq)] = f"{verdict.kind}: {verdict.reason}"
            continue
        chained = REGISTRY if isinstance(verdict, RegistryFact) else event.claim_id
        expected = heads.get(chained)
        heads[chained] = event_hash(stored.data)
        if event.prev_hash != expected:
            found[str(seq)] = f"chain: prev_hash {event.prev_hash} is not the hash of {chained}'s previous event ({expected})"
        elif isinstance(verdict, Refused):
            found[str(seq)] = f"{verdict.kind}: {verdict.reason}"
    return found


def check_log(path: Path, document: KeyDocument, recorded: dict[str, str] | None) -> None:
    """The log's chains and signatures hold as when the backup was made (its manifest's ``findings``)."""
    found = log_findings(path, document)
    new = {seq: why for seq, why in found.items() if recorded is None or recorded.get(seq) != why}
    if new:
        seq, why = next(iter(new.items()))
        more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
        raise BackupTampered(f"{path.name}: sequence {seq}: {why}{more}; the backup's log does not hold against its own key registry")
