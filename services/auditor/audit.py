"""The audit: verify the served checkpoint, mirror what is new, rebuild the tree from the entries.

The auditor does not take the log's word for any hash: it resumes its own tree from the partial tiles
of the last checkpoint it verified, appends every new entry from the served bundles, and requires
that every tile it computes equals the served one and that its root is the new checkpoint's. That is
a consistency check and more: the new tree extends the old one entry for entry. A smaller or equal
checkpoint must have the root the mirror computes for its size. Any failure names its evidence.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from events.log_entry import PREDECESSOR_LINE, EntryError, Predecessor, decode_entry, decode_predecessor
from services.auditor.errors import AuditFailure
from services.auditor.mirror import Mirror
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.errors import TlogFormatError, VerificationError
from tlog.note import Verifier, open_note
from tlog.proofs import tree_root
from tlog.tiles import HEIGHT, WIDTH, Tile, decode_bundle, tile_reader
from tlog.vkeys import parse_vkey

if TYPE_CHECKING:
    from services.auditor.replay import Comparison

Fetch = Callable[[str], Awaitable[bytes]]


@dataclass
class AuditReport:
    checkpoint: Checkpoint
    previous: int
    entries_checked: int
    unreadable_entries: list[int]
    comparison: Comparison | None = None  # what the registry serves against a replay of the entries, when asked
    predecessor: Checkpoint | None = None  # the previous log's last checkpoint, when entry 0 names one (a new log identity)


async def audit(
    fetch: Fetch, mirror: Mirror, log_key: Verifier, witnesses: Sequence[Verifier] = (),
    progress: Callable[[int, int], None] = lambda done, total: None,
) -> AuditReport:
    """Verify and mirror the log served through ``fetch`` (a path under ``/log/`` -> its bytes)."""
    note = (await fetch("checkpoint")).decode()
    checkpoint = verified(note, log_key, witnesses)
    held_note = mirror.checkpoint()
    held = verified(held_note, log_key, ()) if held_note else None
    if held is not None and checkpoint.size <= held.size:
        root = tree_root(checkpoint.size, tile_reader(mirror.tile, held.size)) if checkpoint.size else checkpoint.root
        if root != checkpoint.root:
            raise fork(mirror, held_note, note, f"the checkpoint of size {checkpoint.size} has another root than the tree "
                       f"of size {held.size} verified before holds at that size: a fork")
        return AuditReport(checkpoint, held.size, 0, [], predecessor=predecessor_of(mirror, held.size))
    start = held.size if held else 0
    builder = TreeBuilder.resume(start, mirror.tile) if start else TreeBuilder()
    unreadable = await _grow(fetch, mirror, builder, checkpoint.size, progress)
    if builder.root() != checkpoint.root:
        reason = f"the entries served give another root at size {checkpoint.size} than the signed checkpoint"
        if held is not None:
            reason += f" (or the tree does not extend the one of size {held.size} verified before: a fork)"
        raise fork(mirror, held_note or "", note, reason)
    for tile, data in builder.partial_tiles():
        await _expect(fetch, mirror, tile, data)
    mirror.keep_checkpoint(note)
    return AuditReport(checkpoint, start, checkpoint.size - start, unreadable, predecessor=predecessor_of(mirror, checkpoint.size))


def predecessor_of(mirror: Mirror, size: int) -> Checkpoint | None:
    """The checkpoint entry 0 of the mirrored tree names as its previous log's last (a new log identity), checked
    to be signed by the key the entry names; None when entry 0 is an ordinary entry."""
    if size == 0:
        return None
    first = decode_bundle(mirror.tile(Tile(None, 0, min(WIDTH, size))))[0]
    try:
        stated = decode_predecessor(first)
    except EntryError as error:
        raise AuditFailure(f"entry 0 is a malformed predecessor entry: {error}") from None
    return None if stated is None else predecessor_checkpoint(stated)


def predecessor_checkpoint(stated: Predecessor) -> Checkpoint:
    """The previous log's checkpoint a predecessor entry names, its signature checked with the key it names."""
    try:
        key = parse_vkey(stated.vkey)
        opened, _ = open_note(stated.checkpoint, [key])
        return parse_checkpoint(opened.text)
    except (VerificationError, TlogFormatError) as error:
        raise AuditFailure(f"entry 0 names a previous log's checkpoint that its key {stated.vkey} did not sign ({error})") from None


def verified(note: str, log_key: Verifier, witnesses: Sequence[Verifier]) -> Checkpoint:
    """The checkpoint of ``note``, signed by the log and cosigned by every witness named."""
    try:
        opened, _ = open_note(note, [log_key])
        checkpoint = parse_checkpoint(opened.text)
    except (VerificationError, TlogFormatError) as error:
        raise AuditFailure(f"the served checkpoint is not signed by {log_key.name} ({error})") from None
    for witness in witnesses:
        try:
            open_note(note, [witness])
        except VerificationError:
            raise AuditFailure(f"the checkpoint of size {checkpoint.size} carries no valid cosignature of witness {witness.name}: "
                               "the registry may be showing this auditor another tree than its witnesses saw") from None
    return checkpoint


async def _grow(fetch: Fetch, mirror: Mirror, builder: TreeBuilder, size: int, progress) -> list[int]:
    """Append every entry up to ``size`` from the served bundles, checking each tile completed on the way."""
    unreadable = []
    while builder.size < size:
        index = builder.size >> HEIGHT
        bundle = Tile(None, index, min(WIDTH, size - index * WIDTH))
        served = await fetch(bundle.path())
        entries = decode_bundle(served)
        if len(entries) != bundle.width:
            raise AuditFailure(f"{bundle.path()} holds {len(entries)} entries, not {bundle.width}")
        for entry in entries[builder.size - index * WIDTH :]:
            try:
                decode_entry(entry)
            except EntryError:
                if builder.size != 0 or not entry.startswith(PREDECESSOR_LINE):  # a successor's entry 0: predecessor_of reads it
                    unreadable.append(builder.size)
            for tile, data in builder.append(entry):
                await _expect(fetch, mirror, tile, data, known={bundle: served})
        progress(builder.size, size)
    return unreadable


async def _expect(fetch: Fetch, mirror: Mirror, tile: Tile, data: bytes, *, known: dict[Tile, bytes] | None = None) -> None:
    """The served ``tile`` must be ``data``, the tile the auditor computed; kept in the mirror."""
    served = (known or {}).get(tile)
    if served is None:
        served = await fetch(tile.path())
    if served != data:
        raise AuditFailure(f"the served {tile.path()} does not match the tile computed from the entries")
    mirror.keep_tile(tile, data)


def fork(mirror: Mirror, held: str, served: str, reason: str) -> AuditFailure:
    path = mirror.keep_evidence(held, served, reason)
    return AuditFailure(f"{reason}; both checkpoints are in {path}")
