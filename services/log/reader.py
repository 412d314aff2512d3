"""Reading one claim's events (batched direct gets), its head, and the head of the whole log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from events import Event, decode
from events.subjects import claim_filter
from services.log.chain import event_hash
from services.log.errors import LogError

PAGE = 1000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class StoredEvent:
    """One event as the log holds it: sequence, subject, store time and the exact bytes."""

    seq: int
    subject: str
    stored_at: datetime
    data: bytes = field(repr=False)
    msg_id: str | None = None

    @cached_property
    def event(self) -> Event:
        """The decoded (and upcast) event."""
        return decode(self.data)

    @cached_property
    def hash(self) -> str:
        """SHA-256 of the stored bytes: what the claim's next event records as prev_hash."""
        return event_hash(self.data)


@dataclass(frozen=True)
class ClaimHead:
    """Where a claim's history ends: the sequence to expect and the hash to chain to."""

    seq: int
    hash: str | None


def parse_store_time(text: str) -> datetime:
    """A JetStream RFC 3339 timestamp (nanoseconds) as an aware datetime, truncated to microseconds."""
    stamp = text.rstrip("Z")
    if "." in stamp:
        whole, fraction = stamp.split(".", 1)
        stamp = f"{whole}.{fraction[:6].ljust(6, '0')}"
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC)


def store_time_from_ns(nanoseconds: int) -> datetime:
    """A JetStream timestamp in Unix nanoseconds, truncated to microseconds exactly as ``parse_store_time``.

    Integer arithmetic on purpose: through a float, a page folded live and the same page folded
    from a read of the claim could differ by a microsecond.
    """
    return EPOCH + timedelta(microseconds=nanoseconds // 1000)


async def claim_head(nc: Client, stream: str, claim_id: str) -> ClaimHead:
    """The claim's last stored sequence and hash (0 and None for a claim with no events)."""
    try:
        last = await nc.jetstream().get_last_msg(stream, claim_filter(claim_id), direct=True)
    except NotFoundError:
        return ClaimHead(0, None)
    return ClaimHead(last.seq, event_hash(last.data or b""))


async def stream_head(nc: Client, stream: str) -> int:
    """The sequence of the last event in the log (0 when it is empty)."""
    info = await nc.jetstream().stream_info(stream)
    return info.state.last_seq


async def read_claim(
    nc: Client,
    stream: str,
    claim_id: str,
    *,
    after_seq: int = 0,
    up_to_seq: int | None = None,
    timeout: float = 5.0,
) -> list[StoredEvent]:
    """The claim's events in log order, after ``after_seq`` and up to ``up_to_seq`` when given."""
    events: list[StoredEvent] = []
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        start = after_seq + 1
        while True:
            page, more = await _page(nc, sub, stream, claim_filter(claim_id), start, timeout)
            for stored in page:
                if up_to_seq is not None and stored.seq > up_to_seq:
                    return events
                events.append(stored)
            if not more or not page:
                return events
            start = page[-1].seq + 1
    finally:
        await sub.unsubscribe()


async def _page(nc: Client, sub, stream: str, subject: str, start: int, timeout: float):
    request = json.dumps({"seq": start, "next_by_subj": subject, "batch": PAGE}).encode()
    await nc.publish(f"$JS.API.DIRECT.GET.{stream}", request, reply=sub.subject)
    page: list[StoredEvent] = []
    while True:
        msg = await sub.next_msg(timeout=timeout)
        headers = msg.headers or {}
        status = headers.get("Status")
        if status == "404":
            return page, False
        if status == "204":
            return page, int(headers.get("Nats-Num-Pending", "0")) > 0
        if status:
            raise LogError(f"reading {subject} from {stream} failed: {status} {headers.get('Description')}")
        page.append(
            StoredEvent(
                seq=int(headers["Nats-Sequence"]),
                subject=headers["Nats-Subject"],
                stored_at=parse_store_time(headers["Nats-Time-Stamp"]),
                data=msg.data,
                msg_id=headers.get("Nats-Msg-Id"),
            )
        )
