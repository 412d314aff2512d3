"""A tree grown one entry at a time, held as its right edge: the partial tile of each level and bundle.

Appending never rereads a full tile: when a level's partial tile reaches 256 hashes it is written
out, and its root (one hash of the level above) joins the partial tile above. The root of the tree
is folded from the partial tiles alone, since the complete subtrees of a tree of size ``s`` (one per
set bit of ``s``) all lie in them.
"""

from __future__ import annotations

from collections.abc import Callable

from tlog.errors import TlogFormatError
from tlog.hashes import EMPTY_ROOT, leaf_hash, merkle_root, node_hash
from tlog.tiles import HEIGHT, MAX_ENTRY, WIDTH, Tile, decode_bundle, encode_bundle, split_hashes


class TreeBuilder:
    """The right edge of a tree: ``append`` entries, collect the full tiles, read ``root`` and ``partial_tiles``."""

    def __init__(self) -> None:
        self.size = 0
        self._levels: list[list[bytes]] = [[]]
        self._entries: list[bytes] = []

    @classmethod
    def resume(cls, size: int, read: Callable[[Tile], bytes]) -> TreeBuilder:
        """The builder of a stored tree of ``size``, read from its partial tiles and bundle only."""
        builder = cls()
        builder.size = size
        builder._levels = []
        level = 0
        while size >> (HEIGHT * level) or level == 0:
            width = (size >> (HEIGHT * level)) % WIDTH
            hashes = split_hashes(read(Tile(level, size >> (HEIGHT * (level + 1)), width))) if width else []
            if len(hashes) != width:
                raise TlogFormatError(f"the stored partial tile of level {level} holds {len(hashes)} hashes, not {width}")
            builder._levels.append(hashes)
            level += 1
        width = size % WIDTH
        builder._entries = decode_bundle(read(Tile(None, size >> HEIGHT, width))) if width else []
        if len(builder._entries) != width:
            raise TlogFormatError(f"the stored partial entry bundle holds {len(builder._entries)} entries, not {width}")
        return builder

    def append(self, entry: bytes) -> list[tuple[Tile, bytes]]:
        """Add one entry; answer the tiles (and the bundle) it completed, lowest first."""
        if len(entry) > MAX_ENTRY:  # refused before anything changes
            raise TlogFormatError(f"an entry of {len(entry)} bytes: an entry bundle holds at most {MAX_ENTRY}")
        completed: list[tuple[Tile, bytes]] = []
        self._entries.append(entry)
        if len(self._entries) == WIDTH:
            completed.append((Tile(None, self.size >> HEIGHT), encode_bundle(self._entries)))
            self._entries = []
        carry, level = leaf_hash(entry), 0
        while carry is not None:
            if level == len(self._levels):
                self._levels.append([])
            hashes = self._levels[level]
            hashes.append(carry)
            carry = None
            if len(hashes) == WIDTH:
                index = self.size >> (HEIGHT * (level + 1))
                completed.append((Tile(level, index), b"".join(hashes)))
                carry = merkle_root(hashes)
                self._levels[level] = []
                level += 1
        self.size += 1
        return completed

    def partial_tiles(self) -> list[tuple[Tile, bytes]]:
        """The partial tiles and bundle of the current size (none when every one is full)."""
        found = [
            (Tile(level, self.size >> (HEIGHT * (level + 1)), len(hashes)), b"".join(hashes))
            for level, hashes in enumerate(self._levels)
            if hashes
        ]
        if self._entries:
            found.append((Tile(None, self.size >> HEIGHT, len(self._entries)), encode_bundle(self._entries)))
        return found

    def root(self) -> bytes:
        """The tree's root: its complete subtrees, largest first, folded from the right."""
        subtrees: list[bytes] = []
        for hashes in reversed(self._levels):
            offset = 0
            for bit in reversed(range(HEIGHT)):
                if len(hashes) & (1 << bit):
                    subtrees.append(merkle_root(hashes[offset : offset + (1 << bit)]))
                    offset += 1 << bit
        if not subtrees:
            return EMPTY_ROOT
        root = subtrees[-1]
        for h in reversed(subtrees[:-1]):
            root = node_hash(h, root)
        return root
