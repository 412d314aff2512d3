"""Reading one claim's events (batched direct gets), its head, and the head of the whole log."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from events import Event, decode
from events.subjects import ALL_EVENTS, claim_filter
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


# Set only by ``claimlog import`` (services/log/restore.py): the store time the event had in the
# exported log. It stands for the server's time, so a restored log folds into the same read models.
RESTORED_TIME = "Claimlog-Stored-At"


def stored_time(headers: dict[str, str] | None, server_time: datetime) -> datetime:
    """When the event entered the log: its restored store time, if it was imported, else the server's."""
    restored = headers.get(RESTORED_TIME) if headers else None
    return parse_store_time(restored) if restored else server_time


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
    """The claim's events in log order, after ``after_seq`` and up to ``up_to_seq`` when given.

    A one-off read with its own reply subscription; ``ClaimReader`` shares one for many reads.
    """
    async with ClaimReader(nc, stream) as reader:
        return await reader.read(claim_id, after_seq=after_seq, up_to_seq=up_to_seq, timeout=timeout)


class ClaimReader:
    """Reads claims with batched direct gets, all answered on one wildcard reply subscription.

    Two things make a read cheap (measured in docs/architecture.md): a claim's last sequence comes
    first from the indexed last-by-subject lookup, so a claim with no events (every new claim) costs
    no scan of the stream, and the replies of every read in flight arrive on one subscription
    instead of a subscribe and an unsubscribe per read.
    """

    def __init__(self, nc: Client, stream: str) -> None:
        self._nc, self._stream = nc, stream
        self._prefix = nc.new_inbox()
        self._sub = None
        self._pending: dict[str, tuple[asyncio.Future[bool], list[StoredEvent]]] = {}
        self._counter = 0

    async def __aenter__(self) -> ClaimReader:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Subscribe to the replies (once)."""
        if self._sub is None:
            self._sub = await self._nc.subscribe(f"{self._prefix}.*", cb=self._on_reply)

    async def close(self) -> None:
        """Stop listening for replies."""
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()

    async def read(
        self, claim_id: str, *, after_seq: int = 0, up_to_seq: int | None = None, timeout: float = 5.0
    ) -> list[StoredEvent]:
        """The claim's events in log order, after ``after_seq`` and up to ``up_to_seq`` when given."""
        head = await claim_head(self._nc, self._stream, claim_id)
        last = head.seq if up_to_seq is None else min(head.seq, up_to_seq)
        events: list[StoredEvent] = []
        start = after_seq + 1
        while start <= last:
            page, more = await self._page(claim_filter(claim_id), start, timeout)
            events.extend(stored for stored in page if stored.seq <= last)
            if not more or not page or page[-1].seq >= last:
                break
            start = page[-1].seq + 1
        return events

    async def read_log(self, *, after_seq: int, limit: int, timeout: float = 5.0) -> list[StoredEvent]:
        """Up to ``limit`` events of the whole log after ``after_seq``, in order (the change feed)."""
        page, _ = await self._page(ALL_EVENTS, after_seq + 1, timeout, batch=limit)
        return page

    async def _page(self, subject: str, start: int, timeout: float, *, batch: int = PAGE) -> tuple[list[StoredEvent], bool]:
        await self.start()
        self._counter += 1
        token = str(self._counter)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        page: list[StoredEvent] = []
        self._pending[token] = (done, page)
        request = json.dumps({"seq": start, "next_by_subj": subject, "batch": batch}).encode()
        try:
            await self._nc.publish(f"$JS.API.DIRECT.GET.{self._stream}", request, reply=f"{self._prefix}.{token}")
            more = await asyncio.wait_for(done, timeout)
        except TimeoutError:
            raise LogError(f"reading {subject} from {self._stream}: no answer within {timeout}s") from None
        finally:
            self._pending.pop(token, None)
        return page, more

    async def _on_reply(self, msg: Msg) -> None:
        entry = self._pending.get(msg.subject[len(self._prefix) + 1 :])
        if entry is None or entry[0].done():
            return  # a late reply to a read that timed out
        done, page = entry
        headers = msg.headers or {}
        status = headers.get("Status")
        if status == "404":
            done.set_result(False)
        elif status == "204":
            done.set_result(int(headers.get("Nats-Num-Pending", "0")) > 0)
        elif status:
            done.set_exception(LogError(f"reading from {self._stream} failed: {status} {headers.get('Description')}"))
        else:
            page.append(
                StoredEvent(
                    seq=int(headers["Nats-Sequence"]),
                    subject=headers["Nats-Subject"],
                    stored_at=stored_time(headers, parse_store_time(headers["Nats-Time-Stamp"])),
                    data=msg.data,
                    msg_id=headers.get("Nats-Msg-Id"),
                )
            )
