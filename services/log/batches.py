"""Atomic batches that span claims: many claims' appends stored all together or not at all.

A durable stream (every acknowledgement synced to disk) pays a fixed cost per acknowledgement, so
the bulk path sends up to the server's batch limit of events, over as many claims as it holds, as
one atomic batch answered by one acknowledgement. Each claim's first event in the batch carries
the claim's expected last sequence; its other events follow it inside the batch. A claim that moved
rejects the whole batch and nothing of it is stored: ``BatchRefused`` says so, and the caller reads
the batch's claims again (``moved_claims``) to find which one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from events import Event
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.connection import subscribe_plain
from services.log.errors import LogError, PublishError
from services.log.reader import claim_head
from services.log.signing import PROOF, SIGNATURE, SIGNER, Signer, sign_messages
from services.log.writer import BATCH_DUPLICATE_MSG_ID, WRONG_LAST_SEQUENCE, message_id, parse_ack

log = logging.getLogger(__name__)
# The server's ceiling on one batch (jetstream.limits.batch.max_msgs, 1,000 unless raised).
MAX_BATCH_EVENTS = 1000
ACK_TIMEOUT = 10.0


@dataclass
class ClaimShare:
    """One claim's events in a batch, already chained, and the sequence its last stored event must be at."""

    claim_id: str
    expected_seq: int
    linked: list[tuple[Event, bytes]] = field(default_factory=list)


class BatchRefused(LogError):
    """The server stored nothing of a batch: a claim moved (``conflict``), an id was seen, or another refusal."""

    def __init__(self, message: str, *, conflict: bool) -> None:
        super().__init__(message)
        self.conflict = conflict


class AtomicBatches:
    """Sends batches over many claims on one connection; each commit answers with the batch's last sequence."""

    def __init__(self, nc: Client, stream: str, *, layout: LogLayout = DEFAULT_LAYOUT, signer: Signer | None = None) -> None:
        self._nc, self._stream, self._layout, self._signer = nc, stream, layout, signer
        self._prefix = nc.new_inbox()
        self._waiting: dict[str, asyncio.Future[dict]] = {}
        self._sub = None
        self._counter = 0
        self._blocks = hasattr(nc, "publish_blocks")  # claimlog's client: the batch goes out as one write

    async def __aenter__(self) -> AtomicBatches:
        self._sub = await subscribe_plain(self._nc, f"{self._prefix}.*", self._on_ack)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()

    async def send(self, shares: Sequence[ClaimShare]) -> asyncio.Future[dict]:
        """Publish one batch; the future holds the commit's acknowledgement (see ``first_sequence``)."""
        count = sum(len(share.linked) for share in shares)
        if not 0 < count <= MAX_BATCH_EVENTS:
            raise ValueError(f"a batch holds 1 to {MAX_BATCH_EVENTS} events, got {count}")
        batch_id = uuid.uuid4().hex
        self._counter += 1
        token = str(self._counter)
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        reply = f"{self._prefix}.{token}"
        if self._blocks:
            signed = None if self._signer is None else self._signer.headers([data for share in shares for _, data in share.linked])
            await self._nc.publish_blocks(list(_blocks(shares, batch_id, reply, self._layout, signed)))
        else:
            messages = [m for share in shares for m in _messages(share, self._layout)]
            sign_messages(self._signer, messages)  # one signature over the whole batch, every claim in it
            for number, (subject, data, headers) in enumerate(messages, start=1):
                headers["Nats-Batch-Id"], headers["Nats-Batch-Sequence"] = batch_id, str(number)
                if number == count:
                    headers["Nats-Batch-Commit"] = "1"
                await self._nc.publish(subject, data, reply=reply if number == count else "", headers=headers)
        # nats-py's flusher task writes what was published once the event loop runs it; a caller that
        # goes on deciding the next batch without awaiting would hold this one back until it next waits,
        # and the server would sync it only then instead of meanwhile.
        await asyncio.sleep(0)
        return future

    async def commit(self, shares: Sequence[ClaimShare], *, timeout: float = ACK_TIMEOUT) -> int:
        """Send a batch and wait for it; returns the sequence of its first event, or raises ``BatchRefused``."""
        future = await self.send(shares)
        count = sum(len(share.linked) for share in shares)
        try:
            ack = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise PublishError(f"no acknowledgement of a batch of {count} events within {timeout}s; "
                               "send the same events again (their ids make it safe)") from None
        return first_sequence(ack, count)

    def _on_ack(self, subject: str, _reply: str, data: bytes, headers: object) -> None:
        future = self._waiting.pop(subject.rsplit(".", 1)[1], None)
        if future is None or future.done():
            return
        try:
            future.set_result(parse_ack(data, headers, "a batch"))
        except PublishError as error:
            future.set_exception(error)


def _messages(share: ClaimShare, layout: LogLayout) -> list[tuple[str, bytes, dict[str, str]]]:
    out = [(layout.publish_subject(share.claim_id, event.type), data, {"Nats-Msg-Id": message_id(event)}) for event, data in share.linked]
    out[0][2]["Nats-Expected-Last-Subject-Sequence"] = str(share.expected_seq)
    out[0][2]["Nats-Expected-Last-Subject-Sequence-Subject"] = layout.claim_filter(share.claim_id)
    return out


_FIRST = b"NATS/1.0\r\nNats-Msg-Id: %s\r\nNats-Expected-Last-Subject-Sequence: %d\r\nNats-Expected-Last-Subject-Sequence-Subject: %s\r\n"
_NEXT = b"NATS/1.0\r\nNats-Msg-Id: %s\r\n"
_IN_BATCH = b"Nats-Batch-Id: %s\r\nNats-Batch-Sequence: %d\r\n"
_SIGNED = f"{SIGNER}: %s\r\n{SIGNATURE}: %s\r\n{PROOF}: %s\r\n".encode()


def _blocks(
    shares: Sequence[ClaimShare], batch_id: str, reply: str, layout: LogLayout, signed: Sequence[dict[str, str]] | None = None
) -> Iterator[tuple[str, str, bytes, bytes]]:
    """The batch's messages as ``(subject, reply, header block, payload)``: the blocks ``encode_headers``
    makes of ``_messages``' headers (tests/unit/test_batch_blocks.py compares them), written directly. Every
    value is safe in a block as it is: message ids are UUIDs, the claim filter is made
    of a checked claim id, the batch id is hex, and a signature's headers are hex and base64 (``signed``: one
    dictionary per message, in order, from ``Signer.headers``)."""
    batch, number, last = batch_id.encode(), 0, sum(len(share.linked) for share in shares)
    for share in shares:
        claim_filter = layout.claim_filter(share.claim_id).encode()
        for index, (event, data) in enumerate(share.linked):
            number += 1
            msg_id = message_id(event).encode()
            block = (_FIRST % (msg_id, share.expected_seq, claim_filter) if index == 0 else _NEXT % msg_id) + _IN_BATCH % (batch, number)
            if signed is not None:
                mine = signed[number - 1]
                block += _SIGNED % (mine[SIGNER].encode(), mine[SIGNATURE].encode(), mine[PROOF].encode())
            if number == last:
                yield layout.publish_subject(share.claim_id, event.type), reply, block + b"Nats-Batch-Commit: 1\r\n\r\n", data
            else:
                yield layout.publish_subject(share.claim_id, event.type), "", block + b"\r\n", data


def first_sequence(ack: dict, count: int) -> int:
    """The sequence of a committed batch's first event; a refusal is ``BatchRefused``."""
    error = ack.get("error")
    if error is None:
        return int(ack["seq"]) - count + 1
    code, description = error.get("err_code"), error.get("description", "")
    conflict = code in (WRONG_LAST_SEQUENCE, BATCH_DUPLICATE_MSG_ID)
    raise BatchRefused(f"JetStream stored nothing of the batch: {description} (err_code {code})", conflict=conflict)


async def moved_claims(
    nc: Client, stream: str, shares: Sequence[ClaimShare], *, layout: LogLayout = DEFAULT_LAYOUT
) -> set[str]:
    """The claims of a refused batch whose last sequence is no longer the one the batch expected."""
    heads = await asyncio.gather(*(claim_head(nc, stream, share.claim_id, layout=layout) for share in shares))
    return {share.claim_id for share, head in zip(shares, heads, strict=True) if head.seq != share.expected_seq}


async def stream_takes_batches(nc: Client, stream: str) -> bool:
    """Whether the stream accepts atomic batches (nats-server 2.12+ with ``allow_atomic``); warns when not."""
    try:
        info = await nc.jetstream().stream_info(stream)
    except NotFoundError:
        return False
    if getattr(info.config, "allow_atomic", None):
        return True
    log.warning(
        "stream %s does not take atomic batches (nats-server 2.12+ with allow_atomic): bulk appends go one "
        "event at a time, pipelined, several times slower when every acknowledgement is synced", stream,
    )
    return False
