"""The stored tree read back: its checkpoint verified with its own key, its tiles, proofs made from them.

Used by the integrator (to resume) and by every API process (to serve ``/log/``), so both read the tree
the same way. A proof is computed from tiles: the tiles it needs are found by a dry run on stand-in
hashes (``tlog.tiles.tiles_needed``), fetched, then the proof is made from memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from services.log.tlog_store import TlogStore, TreeRecord
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.note import Ed25519Verifier, open_note
from tlog.proofs import Subtree, consistency_proof, inclusion_proof
from tlog.tiles import HEIGHT, WIDTH, Tile, tile_reader, tiles_needed
from tlog.vkeys import parse_vkey

T = TypeVar("T")


def verifier_of(record: TreeRecord) -> Ed25519Verifier:
    verifier = parse_vkey(record.vkey)
    assert isinstance(verifier, Ed25519Verifier), "a log's key is an Ed25519 note key"
    return verifier


def checkpoint_of(note: str, record: TreeRecord) -> Checkpoint:
    """The checkpoint in a stored note, its signature checked with the tree's own key and origin."""
    opened, _ = open_note(note, [verifier_of(record)])
    checkpoint = parse_checkpoint(opened.text)
    if checkpoint.origin != record.origin:
        raise ValueError(f"the stored checkpoint is of origin {checkpoint.origin!r}, the tree's is {record.origin!r}")
    return checkpoint


async def fetch_tiles(store: TlogStore, tiles: set[Tile]) -> dict[Tile, bytes]:
    return {tile: await store.tile(tile.path()) for tile in sorted(tiles, key=lambda t: (t.level is None, t))}


async def computed(store: TlogStore, size: int, compute: Callable[[Subtree], T]) -> T:
    """``compute(subtree)`` over the stored tree of ``size``."""
    tiles = await fetch_tiles(store, tiles_needed(size, compute))
    return compute(tile_reader(tiles.__getitem__, size))


async def inclusion(store: TlogStore, index: int, size: int) -> list[bytes]:
    return await computed(store, size, lambda subtree: inclusion_proof(index, size, subtree))


async def consistency(store: TlogStore, old: int, size: int) -> list[bytes]:
    return await computed(store, size, lambda subtree: consistency_proof(old, size, subtree))


def edge_tiles(size: int) -> set[Tile]:
    """The partial tiles (and bundle) of the tree of ``size``: all a builder resumes from."""
    found, level = set(), 0
    while size >> (HEIGHT * level):
        width = (size >> (HEIGHT * level)) % WIDTH
        if width:
            found.add(Tile(level, size >> (HEIGHT * (level + 1)), width))
        level += 1
    if size % WIDTH:
        found.add(Tile(None, size >> HEIGHT, size % WIDTH))
    return found


async def resume(store: TlogStore, size: int) -> TreeBuilder:
    """The builder of the stored tree of ``size`` (``TileMissing`` when a tile of its edge is gone)."""
    tiles = await fetch_tiles(store, edge_tiles(size))
    return TreeBuilder.resume(size, tiles.__getitem__)
