"""The transparency log as an API process serves it: the checkpoint, the verifier key, tiles, proofs.

One per process, opened on first use on the process's connection to the log (a reader's is enough:
it only reads the tree's bucket and object store). Tiles are immutable by path, so the ones read are
kept (up to ``TILE_CACHE``); the checkpoint is read again after ``CHECKPOINT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

import nats.errors
from nats.aio.client import Client

from services.log.tlog_store import TlogStore, TreeRecord
from services.tlog.tree import checkpoint_of
from tlog.checkpoint import Checkpoint
from tlog.proof import TlogProof
from tlog.proofs import inclusion_proof
from tlog.tiles import Tile, levels_reader, tile_levels, tiles_needed

TILE_CACHE = 4096  # tiles of at most 8 KB (bundles more), kept once read: they never change
LEVELS_CACHE = 1024  # hash tiles' subtrees for proofs, about 16 KB each
CHECKPOINT_SECONDS = 1.0


class NoTree(LookupError):
    """The transparency log has no tree (or no checkpoint) yet."""


class PublishedLog:
    """What ``/log/`` serves, read from the tree's storage."""

    def __init__(self, nc: Client, stream: str) -> None:
        self._nc, self.stream = nc, stream
        self._store: TlogStore | None = None
        self._record: TreeRecord | None = None
        self._lock = asyncio.Lock()
        self._tiles: OrderedDict[str, bytes] = OrderedDict()
        self._levels: OrderedDict[str, list[list[bytes]]] = OrderedDict()
        self._note: tuple[float, str, Checkpoint] | None = None
        self._looked = float("-inf")  # when a write's answer last found no tree (``entry_index``)

    async def store(self) -> TlogStore:
        if self._store is None:
            async with self._lock:
                if self._store is None:
                    try:
                        self._store = await TlogStore.open(self._nc, self.stream, create=False)
                    except Exception as error:
                        raise NoTree(f"the transparency log of {self.stream} is not made yet ({error})") from None
        return self._store

    async def record(self) -> TreeRecord:
        if self._record is None:
            store = await self.store()
            record = await store.tree()
            if record is None:
                raise NoTree(f"the transparency log of {self.stream} has no tree yet")
            self._record = store.use(record)
            self._tiles.clear()
            self._levels.clear()
        return self._record

    async def entry_index(self, seq: int) -> int:
        """The entry index of the message at stream sequence ``seq``, for a write's answer: never an error
        once the write is stored. Before the tree exists it is ``seq - 1`` (a new tree never succeeds
        another: a new log identity is made with the registry stopped, over a tree that exists), and a
        process that found no tree looks again at most every ``CHECKPOINT_SECONDS``."""
        if self._record is None and time.monotonic() - self._looked < CHECKPOINT_SECONDS:
            return seq - 1
        try:
            async with asyncio.timeout(CHECKPOINT_SECONDS):
                return (await self.record()).entry_index(seq)
        except (NoTree, nats.errors.Error, TimeoutError):
            self._looked = time.monotonic()
            return seq - 1

    async def signed(self) -> tuple[str, Checkpoint]:
        """The last signed checkpoint (its note, as stored, and what it says), at most a second old."""
        now = time.monotonic()
        if self._note is None or now - self._note[0] > CHECKPOINT_SECONDS:
            store = await self.store()
            note, _ = await store.checkpoint()
            if note is None:
                raise NoTree(f"the transparency log of {self.stream} has signed no checkpoint yet")
            cosigned = await store.cosigned()
            if cosigned is not None and cosigned.startswith(note):  # the same checkpoint, with its cosignatures
                note = cosigned
            try:
                checkpoint = checkpoint_of(note, await self.record())
            except ValueError:  # a new log identity (another origin or key) since the tree was read: read it again
                self._record = None
                checkpoint = checkpoint_of(note, await self.record())
            self._note = (now, note, checkpoint)
        return self._note[1], self._note[2]

    async def health(self) -> dict | None:
        """The tree's size and the integrator's state (``refused`` with its reason), or None when there is no tree."""
        try:
            _, checkpoint = await self.signed()
            status = await (await self.store()).status() or {}
        except NoTree:
            return None
        except (nats.errors.Error, TimeoutError) as error:  # its bucket has no leader (a cluster without its majority)
            return {"integrator": "unknown", "reason": f"the tree's bucket did not answer ({type(error).__name__}: {error})"}
        found = {"origin": checkpoint.origin, "size": checkpoint.size, "integrator": status.get("state", "unknown")}
        if status.get("state") == "refused":
            found["reason"] = status.get("reason")
        return found

    async def vkey(self) -> str:
        return (await self.record()).vkey

    async def tile(self, tile: Tile) -> bytes:
        """A tile's bytes (``TileMissing`` when it is not stored: never an empty tile)."""
        path = tile.path()
        data = self._tiles.get(path)
        if data is None:
            data = await (await self.store()).tile(path)
            self._tiles[path] = data
            while len(self._tiles) > TILE_CACHE:
                self._tiles.popitem(last=False)
        else:
            self._tiles.move_to_end(path)
        return data

    async def levels(self, tile: Tile) -> list[list[bytes]]:
        """Every complete subtree of a hash tile (``tlog.tiles.tile_levels``), made once and kept (up to ``LEVELS_CACHE``)."""
        path = tile.path()
        found = self._levels.get(path)
        if found is None:
            found = self._levels[path] = tile_levels(await self.tile(tile), what=path)
            while len(self._levels) > LEVELS_CACHE:
                self._levels.popitem(last=False)
        else:
            self._levels.move_to_end(path)
        return found

    async def proof(self, index: int) -> str | None:
        """The C2SP tlog-proof of entry ``index`` at the current checkpoint, or None before it is integrated."""
        note, checkpoint = await self.signed()
        if index >= checkpoint.size:
            return None
        size = checkpoint.size

        def prove(subtree):
            return inclusion_proof(index, size, subtree)

        held = {tile: await self.levels(tile) for tile in tiles_needed(size, prove)}  # kept: a proof hashes nothing again
        hashes = prove(levels_reader(held.__getitem__, size))
        return TlogProof(index, tuple(hashes), note).format()
