"""The projector's durable pull consumer: takes what is there, never waits to fill a batch.

FastStream's batch subscriber waits for a full batch or its timeout and, in 0.7.8, drops a partial
batch when nats-py raises a plain ``asyncio.TimeoutError`` (see docs/architecture.md). This loop keeps
pull requests outstanding, hands over every message already received as soon as one arrives, and
acknowledges (ack-all) only what the caller has committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from nats.aio.client import Client
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, ReplayPolicy
from nats.js.errors import APIError, NotFoundError

from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.connection import RESTORED_TIME, RawHeaders, subscribe_plain
from services.log.errors import LogError
from services.log.reader import read_store_time, store_time_from_ns, time_stored

log = logging.getLogger(__name__)
HEARTBEAT = 2.0
EXPIRES = 30.0
PREFETCH_BATCHES = 2
# The server deletes a consumer nobody has pulled from for this long: one whose process was killed
# before it could delete it. Nothing is lost with it: each consumer starts again from its reader's own
# checkpoint (``start``), and one in use pulls every EXPIRES seconds.
FORGET_IDLE_SECONDS = 600.0
# How long a start waits for the server to confirm it deleted the consumer's previous copy. A copy whose
# server is gone is deleted from the cluster's records at once, but the confirmation comes from that
# server and never arrives (measured: a ten-second timeout after the deletion took effect).
FORGET_TIMEOUT = 1.0
# How long a start waits for the consumer to be made. A one-copy consumer is made in milliseconds; a
# request sent while the cluster has no meta leader (its leader just died) is never answered, and the
# reader's retry sends it again: a short wait lets the first retry after the election succeed.
CREATE_TIMEOUT = 2.0
# What the server answers when a consumer of that name is still there with another start: 10012 "start
# sequence can not be updated", 10148 "consumer already exists".
STILL_THERE = frozenset({10012, 10148})
Frame = tuple[str, str, bytes, "RawHeaders | dict[str, str]"]  # subject, reply (the ack subject), data, headers


class Delivery(NamedTuple):
    """One event delivered to the consumer. (A named tuple: immutable, and cheaper to build than a
    frozen dataclass, once per event received.)"""

    seq: int
    stored_ns: int  # the server's store time in Unix nanoseconds (an imported event's own is a header)
    subject: str
    data: bytes
    reply: str
    headers: RawHeaders | dict[str, str] | None = None

    def __repr__(self) -> str:
        return f"Delivery(seq={self.seq!r}, stored_ns={self.stored_ns!r}, subject={self.subject!r})"

    @property
    def stored_at(self) -> datetime:
        """When the event entered the log (computed on demand: not every reader needs it)."""
        return time_stored(*self.stamp())

    def store_time(self) -> tuple[datetime, str | None]:
        """Its store time, and why its ``Claimlog-Stored-At`` cannot be it (``read_store_time``: never raises)."""
        restored = self.headers.get(RESTORED_TIME) if self.headers else None
        return read_store_time(store_time_from_ns(self.stored_ns), restored)

    def stamp(self) -> tuple[int, str | None]:
        """The server's store time in Unix nanoseconds, and an imported event's restored store time
        (``time_stored`` makes them ``stored_at``): cheaper to hand to another process than a datetime."""
        restored = self.headers.get(RESTORED_TIME) if self.headers else None
        return self.stored_ns, restored


class _Batches:
    """Batches of what one or more pull consumers delivered into one queue (``_members``)."""

    _members: list[DurableConsumer]
    _queue: asyncio.Queue[tuple[DurableConsumer, Frame]]
    _max_batch: int

    async def next_batch(self, *, timeout: float | None = None, linger: float = 0.0) -> list[Delivery]:
        """Every delivered event already here (up to the batch size), waiting only for the first one.

        With ``linger``, after the first event it waits up to that long for the batch to fill (a
        replay wants full batches; the live projector wants the event it has now). Returns an empty
        list when ``timeout`` passes with nothing delivered.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        batch: list[Delivery] = []
        while not batch:
            for member in self._members:
                if loop.time() - member._heard_at > 2 * HEARTBEAT:
                    member._owed = 0  # not even a heartbeat: the pull request was lost (a reconnect); ask again
                    member._heard_at = loop.time()
                await member._top_up()
            wait = 2 * HEARTBEAT if deadline is None else min(2 * HEARTBEAT, deadline - loop.time())
            if wait <= 0:
                return batch
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout=wait)
            except TimeoutError:
                continue
            self._take_all(item, batch)
        if linger > 0:
            await self._fill(batch, loop.time() + linger)
        return batch

    async def _fill(self, batch: list[Delivery], until: float) -> None:
        loop = asyncio.get_running_loop()
        while len(batch) < self._max_batch and (left := until - loop.time()) > 0:
            for member in self._members:
                await member._top_up()
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout=left)
            except TimeoutError:
                return
            self._take_all(item, batch)

    def _take_all(self, item: tuple[DurableConsumer, Frame], batch: list[Delivery]) -> None:
        """Take this frame, then every one already queued, up to the batch size."""
        now = asyncio.get_running_loop().time()
        while True:
            member, frame = item
            member._heard_at = now  # a message or a heartbeat: the pull request is alive
            member._take(frame, batch)
            if len(batch) >= self._max_batch or self._queue.empty():
                return
            item = self._queue.get_nowait()


class DurableConsumer(_Batches):
    """A durable, ack-all pull consumer over every claim subject, positioned by the caller's checkpoint."""

    def __init__(
        self, nc: Client, stream: str, name: str, *, max_batch: int = 1000, layout: LogLayout = DEFAULT_LAYOUT,
        partitions: Sequence[int] | None = None, queue: asyncio.Queue | None = None,
    ) -> None:
        self._nc, self._stream, self._name, self._max_batch = nc, stream, name, max_batch
        # Some partitions' subjects as the consumer's filters: the server sends nothing else.
        self._filters = [layout.all_events] if partitions is None else [layout.partition_filter(k) for k in sorted(partitions)]
        # Where deliveries wait to be taken: this consumer's own, or one it shares with others (``PartitionConsumers``).
        self._queue: asyncio.Queue[tuple[DurableConsumer, Frame]] = asyncio.Queue() if queue is None else queue
        self._members = [self]
        self._owed = 0
        self._heard_at = 0.0  # loop time of the last message or heartbeat
        self._sub = None
        self._delivered = 0  # the consumer sequence of the last delivery taken (0: none since start)

    async def start(self, after_seq: int) -> None:
        """(Re)create the durable consumer so it delivers every event after ``after_seq``."""
        await self._forget()
        try:
            await self._nc.jetstream(timeout=CREATE_TIMEOUT).add_consumer(self._stream, self._config(after_seq))
        except APIError as error:
            if error.err_code not in STILL_THERE:
                raise
            # The previous copy outlived its deletion (the cluster had no meta leader to carry it out):
            # it is deleted now, and made anew from the checkpoint.
            await self._forget()
            await self._nc.jetstream(timeout=CREATE_TIMEOUT).add_consumer(self._stream, self._config(after_seq))
        # Each message as it is parsed, its headers unparsed: a stored event's own are never read.
        self._sub = await subscribe_plain(self._nc, self._nc.new_inbox(), self._on_frame)
        self._owed = 0
        self._delivered = 0
        self._heard_at = asyncio.get_running_loop().time()

    async def _forget(self) -> None:
        """Delete the consumer's previous copy, if any; an unconfirmed deletion is not waited for."""
        with contextlib.suppress(NotFoundError, TimeoutError):
            await self._nc.jetstream(timeout=FORGET_TIMEOUT).delete_consumer(self._stream, self._name)

    def _config(self, after_seq: int) -> ConsumerConfig:
        start = {"deliver_policy": DeliverPolicy.ALL}
        if after_seq > 0:
            start = {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": after_seq + 1}
        return ConsumerConfig(
            durable_name=self._name,
            **({"filter_subject": self._filters[0]} if len(self._filters) == 1 else {"filter_subjects": self._filters}),
            ack_policy=AckPolicy.ALL,
            ack_wait=120,
            max_ack_pending=self._max_batch * (PREFETCH_BATCHES + 2),
            replay_policy=ReplayPolicy.INSTANT,
            inactive_threshold=FORGET_IDLE_SECONDS,
            # One copy, in memory: the consumer holds nothing the reader cannot rebuild (each start
            # positions it from the reader's checkpoint), so it needs no replicas of its own. Sixteen
            # replicated consumers took 1.6 s to create on three nodes, one-copy ones 0.1 s; after a
            # node died, replicated creations outlasted the request timeout again and again and a
            # worker folded nothing for minutes. A one-copy consumer whose server dies answers 503 to
            # the next pull, and the reader starts again (``_take``) with a copy on a live server.
            num_replicas=1,
            mem_storage=True,
            **start,
        )

    async def stop(self) -> None:
        """Stop receiving; the durable consumer stays on the server (until it has been idle FORGET_IDLE_SECONDS)."""
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    async def ack_through(self, delivery: Delivery) -> None:
        """Acknowledge this delivery and every one before it (call only after they are committed)."""
        await self._nc.publish(delivery.reply, b"+ACK")

    async def ack_batch(self, batch: Sequence[Delivery]) -> None:
        """Acknowledge a committed batch (its last delivery, and so every one before it)."""
        await self.ack_through(batch[-1])

    async def _top_up(self) -> None:
        if self._sub is None:
            raise LogError("the consumer is not started")
        wanted = PREFETCH_BATCHES * self._max_batch - self._owed
        if wanted < self._max_batch:
            return  # enough requested: the next batches arrive while the caller commits this one
        request = {"batch": wanted, "expires": int(EXPIRES * 1e9), "idle_heartbeat": int(HEARTBEAT * 1e9)}
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{self._stream}.{self._name}"
        await self._nc.publish(subject, json.dumps(request).encode(), reply=self._sub.subject)
        self._owed += wanted

    def _check_contiguous(self, delivered: int, seq: int) -> None:
        """Refuse a delivery past one that never arrived. The server counts every delivery it sends; when
        a connection breaks (a restarted server) deliveries in flight are lost, yet the server goes on
        after them and would send them again only after the ack wait. Acknowledging what follows
        (ack-all) would acknowledge them unseen: the caller must start again from its checkpoint. A
        count that goes back (a server restarted from an older state) only means deliveries again."""
        if delivered > self._delivered + 1:  # after a start, the first delivery is the consumer's first
            missed = delivered - self._delivered - 1
            self._delivered = 0
            raise LogError(
                f"consumer {self._name} skipped {missed} deliveries before sequence {seq} (lost with a "
                "connection): start again from the checkpoint"
            )
        self._delivered = delivered

    def _on_frame(self, subject: str, reply: str, data: bytes, headers: RawHeaders | dict[str, str]) -> None:
        self._queue.put_nowait((self, (subject, reply, data, headers)))

    def _take(self, frame: Frame, batch: list[Delivery]) -> None:
        subject, reply, data, headers = frame
        status = headers.get("Status")
        if status is None:
            self._owed -= 1
            seq, delivered, stored_ns = _read_ack(reply)
            self._check_contiguous(delivered, seq)
            batch.append(Delivery(seq, stored_ns, subject, data, reply, headers))
            return
        if status == "100":
            return  # idle heartbeat
        if status in ("404", "408"):
            self._owed = max(0, self._owed - int(headers.get("Nats-Pending-Messages", self._max_batch)))
            return
        if status == "409" and "Deleted" in str(headers.get("Description", "")):
            raise LogError(f"consumer {self._name} was deleted on the server")
        if status == "503":
            # No server answers for the consumer: the one holding it is gone (or restarted, and it was
            # in memory). Pulling again would be answered the same: start again from the checkpoint.
            self._owed = 0
            raise LogError(f"consumer {self._name} is on no live server (503): start again from the checkpoint")
        log.info("pull request ended: %s %s", status, headers.get("Description"))
        self._owed = 0


def _position(reply: str) -> tuple[int, int]:
    """The stream sequence and the store time (Unix nanoseconds) in a JetStream ack subject."""
    seq, _, stored_ns = _read_ack(reply)
    return seq, stored_ns


def _read_ack(reply: str) -> tuple[int, int, int]:
    """The stream sequence, the consumer's delivery count and the store time (Unix nanoseconds) in a
    JetStream ack subject, read at once."""
    tokens = reply.split(".")
    at = _sequence_at(tokens, reply)
    return int(tokens[at]), int(tokens[at + 1]), int(tokens[at + 2])


def _sequence_at(tokens: list[str], reply: str) -> int:
    """Where the stream sequence is among an ack subject's tokens, in both of its formats."""
    if len(tokens) == 9:  # $JS.ACK.<stream>.<consumer>.<delivered>.<seq>.<cseq>.<time>.<pending>
        return 5
    if len(tokens) >= 11:  # $JS.ACK.<domain>.<account>.<stream>.<consumer>.<delivered>.<seq>.<cseq>.<time>...
        return 7
    raise LogError(f"not a JetStream delivery: reply subject {reply!r}")


class PartitionConsumers(_Batches):
    """Several partitions of the log read as one consumer: a durable consumer per partition, each with
    the partition's one filter and starting at its own checkpoint, their deliveries taken together.

    One consumer with a filter per partition costs the server far more: with sixteen filters
    nats-server spent about 460 µs per event delivering a backlog, against 8 µs with one filter
    (bench/scale.py). Their order across partitions is any: each partition has its own checkpoint,
    and no event of one claim is in two partitions."""

    def __init__(self, nc: Client, stream: str, name: str, *, max_batch: int, layout: LogLayout, partitions: Sequence[int]) -> None:
        self._queue: asyncio.Queue[tuple[DurableConsumer, Frame]] = asyncio.Queue()
        self._max_batch = max_batch
        share = max(1, max_batch // len(partitions))  # each asks for its share: as much in flight as one consumer
        self.by_partition = {
            k: DurableConsumer(nc, stream, f"{name}-p{k}", max_batch=share, layout=layout, partitions=[k], queue=self._queue)
            for k in sorted(partitions)
        }
        self._members = list(self.by_partition.values())
        self._nc, self._partition_of = nc, layout.partition_of_subject

    async def start_each(self, positions: dict[int, int]) -> None:
        """(Re)create each partition's consumer after its partition's checkpoint, all at once: after a
        node dies, each creation can wait seconds for its replicas, and one after another they
        outlasted the request timeout, so that a worker's runner started again and again, folding nothing.
        A failure is raised as itself once every creation has ended (not in an exception group, which
        the runner's retry of passing faults would not recognise, and the process would stop)."""
        started = await asyncio.gather(
            *(member.start(positions[k]) for k, member in self.by_partition.items()), return_exceptions=True
        )
        if failed := next((result for result in started if isinstance(result, BaseException)), None):
            raise failed

    async def stop(self) -> None:
        for member in self._members:
            await member.stop()

    async def ack_batch(self, batch: Sequence[Delivery]) -> None:
        """Acknowledge a committed batch: each partition's last delivery in it."""
        last: dict[int, Delivery] = {}
        for delivery in batch:
            last[self._partition_of(delivery.subject)] = delivery
        for delivery in last.values():
            await self._nc.publish(delivery.reply, b"+ACK")
