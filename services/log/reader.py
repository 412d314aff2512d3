"""Reading one claim's events (batched direct gets), its head, and the head of the whole log."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from events import Event, decode
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.chain import event_hash
from services.log.connection import RESTORED_TIME, RawHeaders, subscribe_plain
from services.log.errors import LogError
from services.log.signing import signature_headers

PAGE = 1000
MULTI_LAST = 256  # claims asked about in one batched get
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_from_iso = datetime.fromisoformat


class _computed_once:
    """An attribute computed on first use and kept on the instance, like ``functools.cached_property``.

    Without the lock Python 3.11's cached_property takes on every first use (one lock for all instances):
    decoding is pure, so two threads computing the same value at once would only repeat the work.
    """

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func, self.name, self.__doc__ = func, func.__name__, func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


@dataclass(frozen=True)
class StoredEvent:
    """One event as the log holds it: sequence, subject, store time and the exact bytes."""

    seq: int
    subject: str
    stored_at: datetime
    data: bytes = field(repr=False)
    msg_id: str | None = None
    signature: dict[str, str] | None = field(default=None, repr=False)  # its signature headers (services/log/signing.py)
    # Why its ``Claimlog-Stored-At`` cannot be its store time (unreadable, or later than the server stored
    # it); ``stored_at`` is then the server's time. The gate (services/admission/) refuses such an event.
    time_problem: str | None = None
    restored: str | None = field(default=None, repr=False)  # its Claimlog-Stored-At header as stored, if any

    @_computed_once
    def event(self) -> Event:
        """The decoded (and upcast) event."""
        return decode(self.data)

    @_computed_once
    def hash(self) -> str:
        """SHA-256 of the stored bytes: what the claim's next event records as prev_hash."""
        return event_hash(self.data)


@dataclass(frozen=True)
class ClaimHead:
    """Where a claim's history ends: the sequence to expect and the hash to chain to."""

    seq: int
    hash: str | None


_STAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})?")


def parse_store_time(text: str) -> datetime:
    """An RFC 3339 timestamp (nanoseconds) as an aware UTC datetime, truncated to microseconds; an offset
    is kept (converted to UTC), a time without one is UTC. ``ValueError`` says why a text is not one."""
    if text[-1:] == "Z":
        # What JetStream sends (UTC, "Z"): Python 3.11's parser reads it as UTC and truncates the digits
        # after the microseconds, the same value as below at a fraction of the cost (a read of 1,000
        # events parses 1,000 of these).
        try:
            moment = _from_iso(text)
        except ValueError:
            pass
        else:
            if moment.tzinfo is UTC and len(text) > 19 and text[10] == "T":
                return moment
    found = _STAMP.fullmatch(text)
    if found is None:
        raise ValueError(f"{text[:60]!r} is not an RFC 3339 time (for example 2026-12-07T10:00:00.123456Z)")
    whole, fraction, zone = found.groups()
    moment = datetime.fromisoformat(f"{whole}.{(fraction or '')[:6].ljust(6, '0')}")
    if zone is None or zone == "Z":
        return moment.replace(tzinfo=UTC)
    try:
        return datetime.fromisoformat(f"{whole}{zone}").replace(microsecond=moment.microsecond).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text[:60]!r} is outside the times a reader can hold once in UTC") from None


def read_store_time(server: datetime, restored: str | None) -> tuple[datetime, str | None]:
    """An event's store time, and why its restored store time (``Claimlog-Stored-At``, which an import
    sets) cannot be it. Never raises: any publisher can set the header, so a bad one is a reason to refuse
    the event (services/admission/), never a reader's crash; the time is then the server's."""
    if restored is None:
        return server, None
    try:
        moment = parse_store_time(restored)
    except ValueError as error:
        return server, f"its Claimlog-Stored-At cannot be read: {error}"
    if moment > server:
        # An import restores a time the log already gave the event, so it is never later than this copy's.
        return server, f"its Claimlog-Stored-At {moment.isoformat()} is later than the server stored it ({server.isoformat()})"
    return moment, None


def time_stored(server_ns: int, restored: str | None) -> datetime:
    """When the event entered the log: its restored store time (the header an import sets), if it was
    imported and the time is one (``read_store_time``), else the server's, given in Unix nanoseconds."""
    return store_time_from_ns(server_ns) if restored is None else read_store_time(store_time_from_ns(server_ns), restored)[0]


def store_time_from_ns(nanoseconds: int) -> datetime:
    """A JetStream timestamp in Unix nanoseconds, truncated to microseconds exactly as ``parse_store_time``.

    Integer arithmetic on purpose: through a float, a page folded live and the same page folded
    from a read of the claim could differ by a microsecond.
    """
    return EPOCH + timedelta(microseconds=nanoseconds // 1000)


async def claim_head(nc: Client, stream: str, claim_id: str, *, layout: LogLayout = DEFAULT_LAYOUT) -> ClaimHead:
    """The claim's last stored sequence and hash (0 and None for a claim with no events)."""
    try:
        last = await nc.jetstream().get_last_msg(stream, layout.claim_filter(claim_id), direct=True)
    except NotFoundError:
        return ClaimHead(0, None)
    return ClaimHead(last.seq, event_hash(last.data or b""))


# The largest sequence a request may name: JetStream's own are unsigned 64-bit, but it answers "malformed
# request" past this one, and the read models keep sequences in signed 64-bit integers.
MAX_SEQ = 2**63 - 1


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
    layout: LogLayout = DEFAULT_LAYOUT,
) -> list[StoredEvent]:
    """The claim's events in log order, after ``after_seq`` and up to ``up_to_seq`` when given.

    A one-off read with its own reply subscription; ``ClaimReader`` shares one for many reads.
    """
    async with ClaimReader(nc, stream, layout=layout) as reader:
        return await reader.read(claim_id, after_seq=after_seq, up_to_seq=up_to_seq, timeout=timeout)


class ClaimReader:
    """Reads claims with batched direct gets, all answered on one wildcard reply subscription.

    Two things make a read cheap (measured in docs/architecture.md): the server finds a claim's events
    in its subject index, so a claim with no events (every new claim) costs no scan of the stream, and
    the replies of every read in flight arrive on one subscription instead of a subscribe and an
    unsubscribe per read. A read from the claim's first event is one request per page; a read of
    what is newer than a sequence asks for the claim's head first.
    """

    def __init__(self, nc: Client, stream: str, *, layout: LogLayout = DEFAULT_LAYOUT) -> None:
        self._nc, self._stream, self._layout = nc, stream, layout
        self._prefix = nc.new_inbox()
        self._token_at = len(self._prefix) + 1  # where the read's token starts in a reply subject
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
            self._sub = await subscribe_plain(self._nc, f"{self._prefix}.*", self._on_reply)

    async def close(self) -> None:
        """Stop listening for replies."""
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()

    async def read(
        self, claim_id: str, *, after_seq: int = 0, up_to_seq: int | None = None, timeout: float = 5.0
    ) -> list[StoredEvent]:
        """The claim's events in log order, after ``after_seq`` and up to ``up_to_seq`` when given."""
        subject, start = self._layout.claim_filter(claim_id), after_seq + 1
        if after_seq == 0:
            # From the stream's first sequence the server finds the claim's first event in its subject
            # index (no scan, even for a claim with no events), and each page says whether more of the
            # claim's events follow: no head is needed, and a new claim costs one request.
            last = up_to_seq
        else:
            # From a later sequence, a claim with nothing newer would have the server look through every
            # later block for a match: its head (the indexed last-by-subject lookup) says first whether
            # there is anything to read.
            head = await claim_head(self._nc, self._stream, claim_id, layout=self._layout)
            last = head.seq if up_to_seq is None else min(head.seq, up_to_seq)
        events: list[StoredEvent] = []
        while last is None or start <= last:
            page, more = await self._page(subject, start, timeout, batch=_batch(start, last))
            if page and last is not None and page[-1].seq > last:
                page = [stored for stored in page if stored.seq <= last]
            events.extend(page)
            if not more or not page or (last is not None and page[-1].seq >= last):
                break
            start = page[-1].seq + 1
        return events

    async def read_log(self, *, after_seq: int, limit: int, timeout: float = 5.0) -> list[StoredEvent]:
        """Up to ``limit`` events of the whole log after ``after_seq``, in order (the change feed)."""
        page, _ = await self._page(self._layout.all_events, after_seq + 1, timeout, batch=limit)
        return page

    async def claims_with_events(self, claim_ids: list[str], *, timeout: float = 5.0) -> set[str]:
        """Which of the claims have any event, asked many at a time (a batched last-per-subject get),
        so that a claim seen for the first time costs no read of its own."""
        found: set[str] = set()
        for start in range(0, len(claim_ids), MULTI_LAST):
            filters = [self._layout.claim_filter(claim_id) for claim_id in claim_ids[start : start + MULTI_LAST]]
            page, _ = await self._get({"multi_last": filters, "batch": len(filters) * 64}, timeout, what=f"the heads of {len(filters)} claims")
            found.update(self._layout.claim_of(stored.subject) for stored in page)
        return found

    async def _page(self, subject: str, start: int, timeout: float, *, batch: int = PAGE) -> tuple[list[StoredEvent], bool]:
        return await self._get({"seq": start, "next_by_subj": subject, "batch": batch}, timeout, what=subject)

    async def _get(self, body: dict, timeout: float, *, what: str) -> tuple[list[StoredEvent], bool]:
        await self.start()
        self._counter += 1
        token = str(self._counter)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        page: list[StoredEvent] = []
        self._pending[token] = (done, page)
        request = json.dumps(body).encode()
        try:
            await self._nc.publish(f"$JS.API.DIRECT.GET.{self._stream}", request, reply=f"{self._prefix}.{token}")
            more = await asyncio.wait_for(done, timeout)
        except TimeoutError:
            raise LogError(f"reading {what} from {self._stream}: no answer within {timeout}s") from None
        finally:
            self._pending.pop(token, None)
        return page, more

    def _on_reply(self, subject: str, _reply: str, data: bytes, headers: RawHeaders | dict[str, str]) -> None:
        # Once per event of every read: kept lean (a read of a claim of 1,000 events runs it 1,000 times).
        entry = self._pending.get(subject[self._token_at :])
        if entry is None or entry[0].done():
            return  # a late reply to a read that timed out
        done, page = entry
        status = headers.get("Status")
        if not status:
            restored = headers.get(RESTORED_TIME)  # as in time_stored: an imported event's store time wins
            server = _server_time(headers.get("Nats-Time-Stamp"))
            stored_at, problem = (server, None) if restored is None else read_store_time(server, restored)
            page.append(
                StoredEvent(
                    int(headers["Nats-Sequence"]),
                    headers["Nats-Subject"],
                    stored_at,
                    data,
                    headers.get("Nats-Msg-Id"),
                    signature_headers(headers),
                    problem,
                    restored,
                )
            )
        elif status == "404":
            done.set_result(False)
        elif status == "204":
            done.set_result(int(headers.get("Nats-Num-Pending", "0")) > 0)
        elif status == "503":  # no responders: nothing serves the stream's direct gets
            done.set_exception(LogError(f"reading from {self._stream} failed: no stream {self._stream} on this NATS server (503)"))
        else:
            done.set_exception(LogError(f"reading from {self._stream} failed: {status} {headers.get('Description') or ''}".rstrip()))


def _server_time(text: str | None) -> datetime:
    """The server's own store time of a direct get's reply (it always sends one; the epoch if it did not)."""
    try:
        return parse_store_time(text) if text else EPOCH
    except ValueError:
        return EPOCH


def _batch(start: int, last: int | None) -> int:
    """Events to ask for from ``start``: a page, or fewer when only sequences up to ``last`` are wanted."""
    return PAGE if last is None else max(1, min(PAGE, last - start + 1))
