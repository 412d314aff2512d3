"""Pipelined appends: many claims' appends in flight at once, each still atomic and checked.

A bounded window of unacknowledged appends (never one task per event, never one round trip per
event). Appends to the same claim must wait for the previous one's acknowledgement: the caller
passes the expected sequence, so it serialises per claim and pipelines across claims.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from nats.aio.client import Client

from events import Event
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.chain import chain, event_hash
from services.log.connection import encode_headers, subscribe_plain
from services.log.errors import ConflictError, PublishError
from services.log.signing import Signer, sign_messages
from services.log.writer import (
    AlreadyStored,
    Appended,
    batch_headers,
    check_append,
    interpret_ack,
    parse_ack,
    settle_refusal,
)

ACK_TIMEOUT = 10.0


class Pipeline:
    """Submit appends without waiting; each returns a future of its ``Appended``."""

    def __init__(
        self, nc: Client, stream: str, *, window: int = 512, layout: LogLayout = DEFAULT_LAYOUT, signer: Signer | None = None
    ) -> None:
        self._nc, self._stream, self._layout, self._signer = nc, stream, layout, signer
        self._slots = asyncio.Semaphore(window)
        self._pending: dict[str, tuple[asyncio.Future[Appended], tuple]] = {}
        self._prefix = nc.new_inbox()
        self._sub = None
        self._counter = 0
        self._followups: set[asyncio.Task] = set()
        # claimlog's connections send a header block encoded once; any other client gets nats-py's dictionary.
        self._encode = encode_headers if getattr(nc, "publishes_header_blocks", False) else dict

    async def __aenter__(self) -> Pipeline:
        self._sub = await subscribe_plain(self._nc, f"{self._prefix}.*", self._on_ack)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain()
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def submit(
        self, claim_id: str, events: Sequence[Event], *, expected_seq: int, prev_hash: str | None
    ) -> asyncio.Future[Appended]:
        """Publish one claim's events as an atomic append; waits only when the window is full."""
        check_append(claim_id, events)
        await self._slots.acquire()
        linked = chain(events, prev_hash)
        messages = batch_headers(claim_id, linked, expected_seq, layout=self._layout)
        sign_messages(self._signer, messages)
        self._counter += 1
        token = str(self._counter)
        future: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        self._pending[token] = (future, (claim_id, events, expected_seq, len(linked), event_hash(linked[-1][1])))
        for subject, data, headers in messages[:-1]:
            await self._nc.publish(subject, data, headers=self._encode(headers))
        subject, data, headers = messages[-1]
        await self._nc.publish(subject, data, reply=f"{self._prefix}.{token}", headers=self._encode(headers))
        return future

    async def drain(self, timeout: float = ACK_TIMEOUT) -> None:
        """Wait for every submitted append to be acknowledged (or to fail)."""
        futures = [future for future, _ in self._pending.values()]
        if futures:
            await asyncio.wait(futures, timeout=timeout)
            for token, (future, _) in list(self._pending.items()):
                if not future.done():
                    del self._pending[token]
                    self._slots.release()
                    future.set_exception(PublishError(f"no acknowledgement within {timeout}s; retry the same events"))
        while self._followups:
            await asyncio.gather(*self._followups, return_exceptions=True)

    def _on_ack(self, subject: str, _reply: str, data: bytes, headers: object) -> None:
        token = subject.rsplit(".", 1)[1]
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        self._slots.release()  # here, not in a done callback: that would be one more loop turn per append
        if entry[0].done():
            return
        future, (claim_id, events, expected_seq, count, last_hash) = entry
        try:
            ack = parse_ack(data, headers, f"the append to {claim_id}")
            future.set_result(interpret_ack(ack, claim_id, expected_seq, count=count, last_hash=last_hash))
        except (ConflictError, AlreadyStored) as refusal:
            task = asyncio.create_task(self._resolve_refusal(future, refusal, claim_id, events, expected_seq))
            self._followups.add(task)
            task.add_done_callback(self._followups.discard)
        except PublishError as error:
            future.set_exception(error)

    async def _resolve_refusal(self, future, refusal, claim_id, events, expected_seq) -> None:
        try:
            future.set_result(await settle_refusal(self._nc, self._stream, claim_id, events, expected_seq, refusal, layout=self._layout))
        except (ConflictError, PublishError) as error:
            future.set_exception(error)
