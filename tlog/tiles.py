"""C2SP tlog-tiles v0.1.0: hash tiles of height 8, entry bundles, their paths, and a tree read from tiles.

A hash tile at level ``L`` holds up to 256 hashes of Merkle level ``8 * L``: hash ``i`` of tile ``N``
is the root of the complete subtree of ``256**L`` leaves starting at leaf ``(N * 256 + i) * 256**L``.
A tile of fewer than 256 hashes is partial (``.p/<W>``); the tree of size ``s`` has, at each level, the
full tiles below ``s >> 8(L+1)`` and one partial tile of width ``(s >> 8L) % 256`` when that is not 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tlog.errors import TlogFormatError
from tlog.hashes import HASH_SIZE, merkle_root, node_hash

HEIGHT = 8
WIDTH = 1 << HEIGHT  # hashes (or entries) in a full tile
MAX_ENTRY = 0xFFFF  # an entry bundle's big-endian uint16 length prefix
DATA = "entries"  # the level name of entry bundles in a path


@dataclass(frozen=True, order=True)
class Tile:
    """One tile: ``level`` is a hash level (0..63) or ``None`` for an entry bundle; ``width`` 1..256."""

    level: int | None
    index: int
    width: int = WIDTH

    def __post_init__(self) -> None:
        if self.level is not None and not 0 <= self.level <= 63:
            raise TlogFormatError(f"tile level {self.level} is outside 0..63")
        if self.index < 0 or not 1 <= self.width <= WIDTH:
            raise TlogFormatError(f"tile index {self.index} or width {self.width} is out of range")

    @property
    def full(self) -> bool:
        return self.width == WIDTH

    def path(self) -> str:
        """``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]``."""
        level = DATA if self.level is None else str(self.level)
        suffix = "" if self.full else f".p/{self.width}"
        return f"tile/{level}/{index_path(self.index)}{suffix}"


def index_path(index: int) -> str:
    """A tile index as zero-padded three-digit path elements, all but the last prefixed with ``x``."""
    groups = [f"{index % 1000:03d}"]
    index //= 1000
    while index:
        groups.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(groups))


_PATH = re.compile(r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/)*[0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?")


def parse_path(path: str) -> Tile:
    """The tile a path names, or TlogFormatError saying why it names none."""
    match = _PATH.fullmatch(path.removeprefix("/"))
    if not match:
        raise TlogFormatError(
            f"{path!r} is not a tile path: want tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>], "
            "N in three-digit path elements with all but the last prefixed by x"
        )
    level, digits, width = match.groups()
    if width is not None and int(width) >= WIDTH:
        raise TlogFormatError(f"{path!r}: a partial tile's width is 1..255, not {width}")
    index = int(digits.replace("x", "").replace("/", ""))
    return Tile(None if level == DATA else int(level), index, int(width) if width else WIDTH)


def tiles_for(size: int, *, entries: bool = True) -> Iterator[Tile]:
    """Every tile a tree of ``size`` leaves has (each rightmost partial one included), level by level."""
    level = 0
    while size >> (HEIGHT * level):
        hashes = size >> (HEIGHT * level)
        for index in range(hashes >> HEIGHT):
            yield Tile(level, index)
        if hashes % WIDTH:
            yield Tile(level, hashes >> HEIGHT, hashes % WIDTH)
        level += 1
    if entries:
        yield from (Tile(None, t.index, t.width) for t in tiles_for(size, entries=False) if t.level == 0)


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    """An entry bundle: each entry after its big-endian uint16 length."""
    out = bytearray()
    for i, entry in enumerate(entries):
        if len(entry) > MAX_ENTRY:
            raise TlogFormatError(f"entry {i} is {len(entry)} bytes; an entry bundle holds at most {MAX_ENTRY}")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def decode_bundle(data: bytes) -> list[bytes]:
    """The entries of a bundle, or TlogFormatError naming the offset where it breaks."""
    entries, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise TlogFormatError(f"entry bundle ends inside a length prefix at byte {at}")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise TlogFormatError(f"entry {len(entries)} at byte {at} claims {length} bytes past the bundle's end")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return entries


def split_hashes(data: bytes, *, what: str = "tile") -> list[bytes]:
    """A hash tile's bytes as its hashes."""
    if len(data) % HASH_SIZE or not 0 < len(data) <= WIDTH * HASH_SIZE:
        raise TlogFormatError(f"{what} is {len(data)} bytes: not 1..{WIDTH} hashes of {HASH_SIZE} bytes")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def subtree_tile(level: int, index: int, size: int) -> tuple[Tile, int, int]:
    """The tile holding subtree ``level``/``index`` of the tree of ``size``, and where in it: (tile, first hash, count).

    A subtree of Merkle level ``8L + r`` is the root of ``2**r`` consecutive hashes of one tile at level
    ``L``; the tile is the narrowest one the tree of ``size`` has that holds them.
    """
    tile_level, rest = divmod(level, HEIGHT)
    first = index << rest
    tile_index, offset = divmod(first, WIDTH)
    available = (size >> (HEIGHT * tile_level)) - tile_index * WIDTH
    if offset + (1 << rest) > min(available, WIDTH):
        raise TlogFormatError(f"subtree {level}/{index} is not complete in a tree of size {size}")
    return Tile(tile_level, tile_index, min(available, WIDTH)), offset, 1 << rest


def tile_reader(read: Callable[[Tile], bytes], size: int) -> Callable[[int, int], bytes]:
    """The ``subtree(level, index)`` function (``proofs``) of the tree of ``size`` read through ``read(tile)``."""

    def subtree(level: int, index: int) -> bytes:
        tile, offset, count = subtree_tile(level, index, size)
        hashes = split_hashes(read(tile), what=tile.path())
        if len(hashes) != tile.width:
            raise TlogFormatError(f"{tile.path()} holds {len(hashes)} hashes, not {tile.width}")
        return merkle_root(hashes[offset : offset + count])

    return subtree


def tile_levels(data: bytes, *, what: str = "tile") -> list[list[bytes]]:
    """Every complete subtree a hash tile holds, by height within it: ``levels[0]`` its hashes, ``levels[j][i]``
    the root of hashes ``i * 2**j`` to ``(i + 1) * 2**j - 1``. Made once per tile (at most 255 node hashes), it
    answers every subtree of the tile without hashing again: what a process serving many proofs keeps."""
    levels = [split_hashes(data, what=what)]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_hash(below[i], below[i + 1]) for i in range(0, len(below) - 1, 2)])
    return levels


def levels_reader(levels: Callable[[Tile], list[list[bytes]]], size: int) -> Callable[[int, int], bytes]:
    """``tile_reader`` over tiles' precomputed levels (``tile_levels``): a subtree is a lookup, not a hashing."""

    def subtree(level: int, index: int) -> bytes:
        tile, offset, count = subtree_tile(level, index, size)
        held = levels(tile)
        if len(held[0]) != tile.width:
            raise TlogFormatError(f"{tile.path()} holds {len(held[0])} hashes, not {tile.width}")
        return held[count.bit_length() - 1][offset // count]

    return subtree


def tiles_needed(size: int, compute: Callable[[Callable[[int, int], bytes]], object]) -> set[Tile]:
    """The tiles ``compute(subtree)`` reads in the tree of ``size`` (run once on stand-in hashes), so a
    reader over a network fetches them all first and then computes from memory."""
    wanted: set[Tile] = set()

    def record(level: int, index: int) -> bytes:
        wanted.add(subtree_tile(level, index, size)[0])
        return bytes(32)

    compute(record)
    return wanted
