"""Republishing exported events byte for byte into a stream, from where it ends (``claimlog import``).

Unlike an append, a restore does not encode or chain anything: each message carries the exact bytes
it had in the exported log, for the same claim and event type, in the same order. It is published
on the subject producers use, so the stream stores it in its own layout (a log stored before
partitions is restored into a partitioned stream as it is). Every publish is still checked:
its message id, the stream's expected last sequence, and an acknowledgement at the sequence the
restore expects (so a restored full log has the exported sequences).

A restore knows every sequence in advance, so what it expects is the stream's last sequence
(``Nats-Expected-Last-Sequence``), not each claim's: the stream's holds while many publishes are in
flight, on one server as on a cluster, where the leader counts the proposals it has not yet applied.
A claim's expected sequence does not: a clustered stream refuses a second publish expecting the last
sequence of a claim whose previous one is still being replicated (``wrong last sequence``, err_code
10164), so pipelined batches over the same claims would stop at the second batch. The stream's
expected sequence is also the stronger check: nothing at all may come between two restored events.

On a stream that takes atomic batches the events go in batches of up to the server's limit over many
claims, a few batches in flight, the first event of each expecting the sequence before it, and one
synced acknowledgement answers a whole batch. Otherwise each event is its own acknowledged publish,
expecting the sequence before it. Anything else written to the stream meanwhile refuses the next
batch (or publish) and everything after it: nothing of that batch is stored, and the restore stops
with the server's refusal (``wrong last sequence``) and the sequence it was at.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from nats.aio.client import Client

from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.batches import MAX_BATCH_EVENTS, stream_takes_batches
from services.log.connection import RESTORED_TIME, encode_headers, subscribe_plain
from services.log.errors import PublishError
from services.log.writer import parse_ack

ACK_TIMEOUT = 30.0
BATCHES_IN_FLIGHT = 4  # well under the server's 50 per stream


@dataclass(frozen=True)
class RestoredEvent:
    """One exported event to republish: its claim and type, its exact bytes, its id and its original store time."""

    claim_id: str
    event_type: str
    data: bytes = field(repr=False)
    msg_id: str | None
    stored_at: str  # RFC 3339, as exported
    signature: dict[str, str] | None = None  # its signature headers, republished as they were (services/log/signing.py)


class Republisher:
    """Publishes restored events in order with a bounded window of unacknowledged ones."""

    def __init__(
        self, nc: Client, stream: str, *, after_seq: int = 0, window: int = 256, layout: LogLayout = DEFAULT_LAYOUT
    ) -> None:
        self._nc, self._stream, self._layout = nc, stream, layout
        self._slots = asyncio.Semaphore(window)
        self._pending: dict[str, asyncio.Future[None]] = {}
        self._prefix = nc.new_inbox()
        self._sub = None
        self._position = after_seq  # the sequence the last published event must be stored at
        self._batch: list[tuple[str, bytes, dict[str, str]]] | None = None  # None: one publish per event
        self._blocks = hasattr(nc, "publish_blocks")  # claimlog's client: header blocks, a batch in one write
        self.failure: PublishError | None = None

    async def __aenter__(self) -> Republisher:
        self._sub = await subscribe_plain(self._nc, f"{self._prefix}.*", self._on_ack)
        if await stream_takes_batches(self._nc, self._stream):
            self._batch, self._slots = [], asyncio.Semaphore(BATCHES_IN_FLIGHT)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None:
            await self._send_batch()
        await self.drain()
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def publish(self, event: RestoredEvent) -> int:
        """Publish one event; returns the sequence it must be stored at. Raises the first failure seen."""
        if self.failure is not None:
            raise self.failure
        self._position += 1
        seq = self._position
        subject = self._layout.publish_subject(event.claim_id, event.event_type)
        headers = {RESTORED_TIME: event.stored_at}
        if event.msg_id:
            headers["Nats-Msg-Id"] = event.msg_id
        if event.signature:
            headers.update(event.signature)
        if not self._batch:  # a batch's first event, or each event when there are no batches
            headers["Nats-Expected-Last-Sequence"] = str(seq - 1)
        if self._batch is not None:
            self._batch.append((subject, event.data, headers))
            if len(self._batch) == MAX_BATCH_EVENTS:
                await self._send_batch()
            return seq
        await self._slots.acquire()
        await self._nc.publish(subject, event.data, reply=self._expect_ack(seq, seq), headers=headers)
        return seq

    async def _send_batch(self) -> None:
        if not self._batch:
            return
        batch, self._batch = self._batch, []
        await self._slots.acquire()
        batch_id, last = uuid.uuid4().hex, len(batch)
        messages = []
        for number, (subject, data, headers) in enumerate(batch, start=1):
            headers["Nats-Batch-Id"], headers["Nats-Batch-Sequence"] = batch_id, str(number)
            reply = ""
            if number == last:
                headers["Nats-Batch-Commit"], reply = "1", self._expect_ack(self._position - last + 1, self._position)
            messages.append((subject, reply, headers, data))
        if self._blocks:  # the whole batch in one write (``AtomicBatches`` does the same)
            await self._nc.publish_blocks([(subject, reply, encode_headers(headers), data) for subject, reply, headers, data in messages])
        else:
            for subject, reply, headers, data in messages:
                await self._nc.publish(subject, data, reply=reply, headers=headers)
        await asyncio.sleep(0)  # let nats-py's flusher write it now, not when the next batch waits

    def _expect_ack(self, first: int, last: int) -> str:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: self._slots.release())
        self._pending[f"{first}-{last}"] = future
        return f"{self._prefix}.{first}-{last}"

    async def drain(self, timeout: float = ACK_TIMEOUT) -> None:
        """Wait for every acknowledgement; raise the first failure."""
        futures = list(self._pending.values())
        if futures:
            _, late = await asyncio.wait(futures, timeout=timeout)
            if late and self.failure is None:
                self.failure = PublishError(f"{len(late)} publishes (events or batches) not acknowledged within {timeout}s: "
                                            "they may or may not be stored")
        if self.failure is not None:
            raise self.failure

    def _on_ack(self, subject: str, _reply: str, data: bytes, headers: object) -> None:
        token = subject.rsplit(".", 1)[1]
        future = self._pending.pop(token, None)
        if future is None or future.done():
            return
        first, _, last = token.partition("-")
        what = f"the event for sequence {last}" if first == last else f"the batch of sequences {first} to {last}"
        try:
            problem = _problem(parse_ack(data, headers, what), what, int(last))
        except PublishError as error:
            problem = str(error)
        if problem and self.failure is None:
            self.failure = PublishError(problem)
        future.set_result(None)


def _problem(ack: dict, what: str, last_seq: int) -> str | None:
    error = ack.get("error")
    if error is not None:
        return f"{what} was refused: {error.get('description')} (err_code {error.get('err_code')})"
    if ack.get("duplicate"):
        return f"{what} has a message id the stream already holds (stored at {ack.get('seq')})"
    if int(ack["seq"]) != last_seq:
        return f"{what} was stored to end at {ack['seq']}, not {last_seq}: another writer is publishing"
    return None
