"""Republishing exported events byte for byte into an empty stream (``claimlog import``).

Unlike an append, a restore does not encode or chain anything: each message carries the exact bytes
it had in the exported log, for the same claim and event type, in the same order. It is published
on the subject producers use, so the stream stores it in its own layout (a log stored before
partitions is restored into a partitioned stream as it is). Every publish is still checked:
its message id, the claim's expected last sequence, and an acknowledgement at the sequence the
restore expects (so a restored full log has the exported sequences).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from nats.aio.client import Client

from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.connection import RESTORED_TIME, subscribe_plain
from services.log.errors import PublishError
from services.log.writer import parse_ack

ACK_TIMEOUT = 30.0


@dataclass(frozen=True)
class RestoredEvent:
    """One exported event to republish: its claim and type, its exact bytes, its id and its original store time."""

    claim_id: str
    event_type: str
    data: bytes = field(repr=False)
    msg_id: str | None
    stored_at: str  # RFC 3339, as exported


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
        self._claims: dict[str, int] = {}  # claim -> sequence of its last event in this restore
        self.failure: PublishError | None = None

    async def __aenter__(self) -> Republisher:
        self._sub = await subscribe_plain(self._nc, f"{self._prefix}.*", self._on_ack)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain()
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def publish(self, event: RestoredEvent) -> int:
        """Publish one event; returns the sequence it must be stored at. Raises the first failure seen."""
        if self.failure is not None:
            raise self.failure
        await self._slots.acquire()
        self._position += 1
        seq, claim = self._position, event.claim_id
        headers = {
            "Nats-Expected-Last-Subject-Sequence": str(self._claims.get(claim, 0)),
            "Nats-Expected-Last-Subject-Sequence-Subject": self._layout.claim_filter(claim),
            RESTORED_TIME: event.stored_at,
        }
        if event.msg_id:
            headers["Nats-Msg-Id"] = event.msg_id
        self._claims[claim] = seq
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda _: self._slots.release())
        self._pending[str(seq)] = future
        subject = self._layout.publish_subject(claim, event.event_type)
        await self._nc.publish(subject, event.data, reply=f"{self._prefix}.{seq}", headers=headers)
        return seq

    async def drain(self, timeout: float = ACK_TIMEOUT) -> None:
        """Wait for every acknowledgement; raise the first failure."""
        futures = list(self._pending.values())
        if futures:
            _, late = await asyncio.wait(futures, timeout=timeout)
            if late and self.failure is None:
                self.failure = PublishError(f"{len(late)} events not acknowledged within {timeout}s")
        if self.failure is not None:
            raise self.failure

    def _on_ack(self, subject: str, _reply: str, data: bytes, headers: object) -> None:
        token = subject.rsplit(".", 1)[1]
        future = self._pending.pop(token, None)
        if future is None or future.done():
            return
        try:
            problem = _problem(parse_ack(data, headers, f"the event for sequence {token}"), int(token))
        except PublishError as error:
            problem = str(error)
        if problem and self.failure is None:
            self.failure = PublishError(problem)
        future.set_result(None)


def _problem(ack: dict, expected_seq: int) -> str | None:
    error = ack.get("error")
    if error is not None:
        return f"the event for sequence {expected_seq} was refused: {error.get('description')} (err_code {error.get('err_code')})"
    if ack.get("duplicate"):
        return f"the event for sequence {expected_seq} has a message id the stream already holds (stored at {ack.get('seq')})"
    if int(ack["seq"]) != expected_seq:
        return f"the event for sequence {expected_seq} was stored at {ack['seq']}: another writer is publishing"
    return None
