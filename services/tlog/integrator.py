"""The integrator: every message the claim stream stores, in order, into the tree; a signed checkpoint each round.

Entry ``i`` is the message at stream sequence ``i + 1`` (``events/log_entry.py``), every message
included; in a log that succeeds another (a new log identity), entry 0 names the previous log's last
checkpoint and entry ``i`` is the message at sequence ``i``. One integrator at a time holds the tree (a lease in the tree's bucket), and a checkpoint is
only ever replaced by compare-and-set at the revision it read: two integrators never both extend the
tree. Each round it reads what the stream holds past the tree, appends it, writes the tiles it
completed, then the partial tiles and bundle of the new size, and only then the signed checkpoint; a
crash anywhere leaves the last checkpoint and every tile it needs, so the next run resumes exactly
where the stored tree ends (tiles written past it are written again, byte for byte the same).

Entries arrive through direct gets, which a lagging follower may answer with fewer messages than the
stream holds: a missing answer is never a gap. Only a sequence the stream skips, seen again and again,
stops the integrator, as does a stream that no longer holds the tree's entries (re-created, or restored
from an older backup), unless rehashing it gives the same root.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, replace

from nats.aio.client import Client
from nats.errors import Error as NatsError

from events.log_entry import encode_entry, encode_predecessor, from_message
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.errors import LogError
from services.log.reader import ClaimReader, StoredEvent
from services.log.tlog_store import LostRace, TileMissing, TlogStore, TreeRecord
from services.tlog.tree import checkpoint_of, resume
from services.tlog.witnesses import Witnesses
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint
from tlog.note import Ed25519Signer, sign_note

log = logging.getLogger(__name__)
PUTS_IN_FLIGHT = 16
BACKLOG_BATCHES = 4  # batches a round appends before it signs, when the stream is that far ahead
GAP_PATIENCE = 10.0  # seconds a sequence may stay unanswered while later ones are before it is a gap


class Refused(Exception):
    """The integrator will not extend this tree: why, for the operator (and ``/health``)."""


@dataclass
class Tree:
    record: TreeRecord
    checkpoint: Checkpoint
    revision: int
    builder: TreeBuilder


def first_entries(record: TreeRecord) -> TreeBuilder:
    """The builder of a tree before any stream message: empty, or holding a successor's predecessor entry."""
    builder = TreeBuilder()
    if record.predecessor is not None:
        builder.append(encode_predecessor(record.predecessor))
    return builder


def entry_of(stored: StoredEvent) -> bytes:
    """A stored message's entry bytes."""
    headers = dict(stored.signature or {})
    if stored.msg_id is not None:
        headers["Nats-Msg-Id"] = stored.msg_id
    return encode_entry(from_message(stored.subject, stored.stored_at, headers, stored.data))


class Integrator:
    """Builds the transparency log of one stream while it holds the tree's lease."""

    def __init__(
        self, nc: Client, store: TlogStore, signer: Ed25519Signer, *, holder: str, layout: LogLayout = DEFAULT_LAYOUT,
        interval: float = 1.0, batch: int = 1000, lease_seconds: float = 10.0, witnesses: Witnesses | None = None,
    ) -> None:
        self.nc, self.store, self.signer, self.holder, self.layout = nc, store, signer, holder, layout
        self.witnesses = witnesses
        self._pushing: asyncio.Task[None] | None = None
        self._ahead: tuple[int, asyncio.Future[list[StoredEvent]]] | None = None
        self._pushed = -1
        self.interval, self.batch, self.lease_seconds = interval, batch, lease_seconds
        self.stream = store.stream
        self.tree: Tree | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Integrate until ``stop``; ``Refused`` (recorded in the tree's status) when the tree cannot go on."""
        while not stop.is_set():
            try:
                if not await self.store.take_lease(self.holder, self.lease_seconds):
                    await _sleep(stop, 1.0)
                    continue
                await self._hold(stop)
            except LostRace as lost:
                log.warning("transparency log of %s: %s; reading the tree again", self.stream, lost)
            except (NatsError, LogError, TimeoutError) as error:  # a node lost, a leader being elected: read the tree again
                log.warning("transparency log of %s: %s (%s); reading the tree again in a second",
                            self.stream, type(error).__name__, error)
                await _sleep(stop, 1.0)
            except Refused as refused:
                await self.store.set_status({"state": "refused", "reason": str(refused), "at": time.time()})
                await self.store.release_lease(self.holder)  # an operator acts on the refusal (a new log identity) at once
                raise
        with contextlib.suppress(NatsError, LogError, TimeoutError):  # stopped: the tree is free for the next integrator
            await self.store.release_lease(self.holder)

    async def _hold(self, stop: asyncio.Event) -> None:
        if self._ahead is not None:
            self._ahead[1].cancel()
            self._ahead = None
        self.tree = await self.open_tree()
        await self.store.set_status({"state": "integrating", "holder": self.holder, "at": time.time()})
        async with ClaimReader(self.nc, self.stream, layout=self.layout) as reader:
            renewed = time.monotonic()
            while not stop.is_set():
                moved = await self.round(reader)
                if time.monotonic() - renewed > self.lease_seconds / 3:
                    if not await self.store.take_lease(self.holder, self.lease_seconds):
                        raise LostRace(f"the lease of the transparency log of {self.stream} was taken")
                    renewed = time.monotonic()
                if not moved:
                    await _sleep(stop, min(self.interval, 0.1))

    async def open_tree(self) -> Tree:
        """The stored tree, made when there is none, checked against the stream it is built over."""
        info = await self.nc.jetstream().stream_info(self.stream)
        created = info.created.isoformat() if info.created else ""
        record = await self.store.tree()
        if record is None:
            await self._refuse_if_witnessed()
            record = TreeRecord(self.signer.name, self.signer.vkey(), self.stream, created, time.time())
            await self.store.create_tree(record)
            log.warning("transparency log of %s: a new tree, origin %s", self.stream, record.origin)
        self.store.use(record)
        if record.vkey != self.signer.vkey():
            raise Refused(f"the tree of {self.stream} is signed by {record.vkey}, and this integrator's key is "
                          f"{self.signer.vkey()}: a log's key never changes; start it with the tree's key")
        note, revision = await self.store.checkpoint()
        if note is None:
            return Tree(record, Checkpoint(record.origin, 0, TreeBuilder().root()), 0, first_entries(record))
        checkpoint = checkpoint_of(note, record)
        if info.state.last_seq < checkpoint.size - record.offset:
            raise Refused(f"the stream {self.stream} holds {info.state.last_seq} messages and the tree "
                          f"{checkpoint.size - record.offset}: "
                          "it was re-created or restored from a backup older than the last checkpoint; "
                          "this log cannot continue (start a new log identity: new origin and key)")
        await self._refuse_if_witnessed_further(record, checkpoint, note, info.state.last_seq)
        try:
            builder = await resume(self.store, checkpoint.size) if record.stream_created == created else None
        except TileMissing:
            builder = None
        if builder is None:
            builder = await self._rehash(checkpoint, record)
            record = replace(record, stream_created=created)
            await self.store.update_tree(record)
        elif builder.root() != checkpoint.root:
            raise Refused(f"the stored tiles of {self.stream} do not give the checkpoint's root at size {checkpoint.size}")
        return Tree(record, checkpoint, revision, builder)

    async def _refuse_if_witnessed(self) -> None:
        """Before a fresh tree: a witness that holds a checkpoint of this origin means the log existed."""
        if self.witnesses is None:
            return
        empty = Checkpoint(self.signer.name, 0, TreeBuilder().root())
        held = await self.witnesses.held_sizes(sign_note(empty.text(), [self.signer]))
        if any(held.values()):
            named = ", ".join(f"{url} holds size {size}" for url, size in held.items())
            raise Refused(f"the log {self.signer.name} has no stored tree, but its witnesses cosigned one ({named}): "
                          "it was lost or deleted; restore it, or start a new log identity (new origin and key)")

    async def _refuse_if_witnessed_further(self, record: TreeRecord, checkpoint: Checkpoint, note: str, last_seq: int) -> None:
        """A witness that cosigned a larger tree than the stream can give again: the registry was restored from
        a backup older than its last published checkpoint, and new writes would fork the log."""
        if self.witnesses is None:
            return
        held = await self.witnesses.held_sizes(note)
        beyond = {url: size for url, size in held.items() if size > last_seq + record.offset}
        if beyond:
            named = ", ".join(f"{url} holds size {size}" for url, size in beyond.items())
            raise Refused(f"the witnesses of {record.origin} cosigned a larger tree than the stream {self.stream} holds "
                          f"({named}; the stored tree is of size {checkpoint.size}, the stream {last_seq} messages): it was "
                          "restored from a backup older than the last published checkpoint, and this log cannot continue "
                          "(start a new log identity: new origin and key)")

    async def _rehash(self, checkpoint: Checkpoint, record: TreeRecord) -> TreeBuilder:
        """The tree rebuilt from the stream up to the checkpoint's size, its tiles written again; ``Refused``
        unless it has the checkpoint's root (one entry changed is a different log)."""
        log.warning("transparency log of %s: rehashing %d entries of a re-created stream (or lost tiles)", self.stream, checkpoint.size)
        builder = first_entries(record)
        async with ClaimReader(self.nc, self.stream, layout=self.layout) as reader:
            while builder.size < checkpoint.size:
                wanted = min(self.batch, checkpoint.size - builder.size)
                stored = await self._contiguous(reader, builder.size - record.offset, wanted)
                if not stored:
                    await asyncio.sleep(0.1)
                completed = []
                for message in stored:
                    completed += builder.append(entry_of(message))
                await self._put(completed)
        if builder.root() != checkpoint.root:
            raise Refused(f"the stream {self.stream} no longer holds the tree's entries: rehashing its first "
                          f"{checkpoint.size} messages gives another root than the signed checkpoint (the log was rewritten)")
        await self._put(builder.partial_tiles())
        return builder

    async def round(self, reader: ClaimReader) -> bool:
        """Append what the stream holds past the tree (up to ``BACKLOG_BATCHES`` batches on a backlog, one when it
        keeps up), and sign when it is time; whether it moved. The tiles a batch completes are stored while the
        next batch is hashed, and all of them before the checkpoint that needs them."""
        tree = self.tree
        assert tree is not None
        head = (await self.nc.jetstream().stream_info(self.stream)).state.last_seq
        integrated = tree.builder.size - tree.record.offset  # the stream sequence the tree holds up to
        storing: list[asyncio.Task[None]] = []
        try:
            for _ in range(BACKLOG_BATCHES):
                if head <= integrated:
                    break
                stored = await self._read(reader, integrated, head)
                if not stored:
                    break
                completed = []
                for message in stored:
                    completed += tree.builder.append(entry_of(message))
                integrated += len(stored)
                storing.append(asyncio.ensure_future(self._put(completed)))
            await asyncio.gather(*storing)
        except BaseException:
            for task in storing:
                task.cancel()
            raise
        if tree.builder.size > tree.checkpoint.size:
            await self.publish()
            return True
        return False

    async def _read(self, reader: ClaimReader, size: int, head: int) -> list[StoredEvent]:
        """The next batch after ``size``; on a backlog the batch after it is read meanwhile (the server
        answers while this process encodes, hashes and stores: reading was half of a backlog's time)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] != size:
            ahead[1].cancel()
        stored = await ahead[1] if ahead is not None and ahead[0] == size else None
        if not stored:
            stored = await self._contiguous(reader, size, min(self.batch, head - size))
        after = size + len(stored)
        if head > after:
            self._ahead = (after, asyncio.ensure_future(self._contiguous(reader, after, min(self.batch, head - after))))
        return stored

    async def publish(self) -> Checkpoint:
        """Write the partial tiles of the tree's size, then sign and compare-and-set the checkpoint."""
        tree = self.tree
        assert tree is not None
        await self._put(tree.builder.partial_tiles())
        checkpoint = Checkpoint(tree.record.origin, tree.builder.size, tree.builder.root())
        note = sign_note(checkpoint.text(), [self.signer])
        tree.revision = await self.store.swap_checkpoint(note, tree.revision)
        tree.checkpoint = checkpoint
        if self.witnesses is not None and (self._pushing is None or self._pushing.done()):
            self._pushing = asyncio.create_task(self._push())
        return checkpoint

    async def _push(self) -> None:
        """Push the newest checkpoint to the witnesses until the one pushed is the newest (never holding rounds up)."""
        assert self.witnesses is not None and self.tree is not None
        while self.tree.checkpoint.size != self._pushed:
            checkpoint = self.tree.checkpoint
            note, _ = await self.store.checkpoint()
            if note is None or not note.startswith(checkpoint.text()):
                return
            await self.witnesses.push(note, checkpoint)
            self._pushed = checkpoint.size

    async def _contiguous(self, reader: ClaimReader, size: int, wanted: int) -> list[StoredEvent]:
        """The next messages after sequence ``size``, from ``size + 1`` on without a hole; waits while the
        answer skips a sequence (a lagging follower), and refuses one skipped for ``GAP_PATIENCE``."""
        deadline = time.monotonic() + GAP_PATIENCE
        while True:
            stored = await reader.read_log(after_seq=size, limit=wanted)
            if not stored:
                return []  # no answer yet (a follower behind the leader): not a gap
            run = 0
            while run < len(stored) and stored[run].seq == size + 1 + run:
                run += 1
            if run:
                return stored[:run]
            if time.monotonic() > deadline:
                first = stored[0].seq if stored else None
                raise Refused(f"sequence {size + 1} of {self.stream} is missing (the next stored is {first}): "
                              "the log has a gap, and the tree would skip an entry")
            await asyncio.sleep(0.1)

    async def _put(self, tiles) -> None:
        """Store tiles, several at a time (each is its own object: the order between them does not matter,
        only that all are stored before the checkpoint that needs them)."""
        tiles = list(tiles)
        for start in range(0, len(tiles), PUTS_IN_FLIGHT):
            await asyncio.gather(*(self.store.put_tile(t.path(), d) for t, d in tiles[start : start + PUTS_IN_FLIGHT]))


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
