"""A claim page as of a log sequence or a stored time: the claim's events up to then, folded by the projector's code."""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, select

from events import Event, UnknownEventError
from events.envelope import CLAIM_ID_PATTERN
from projections.base import Record
from projections.claim_page import apply, derive, facts_of
from projections.page_model import PAGE, ClaimPage
from projections.repeats import Key, folded_before, key_of
from projections.tables import page_snapshots
from services.admission import Admitted, Gate, InOrder, gate_for
from services.log import MAX_SEQ, ClaimLog, StoredEvent
from services.timeline.cache import ClaimEvents


class BadAsOf(ValueError):
    """An as-of point that cannot be read: says what was wrong with it."""


@dataclass(frozen=True)
class AsOf:
    """A moment of the log: the events up to a sequence, or those stored at or before a time."""

    seq: int | None = None
    at: datetime | None = None

    def includes(self, stored: StoredEvent) -> bool:
        """Whether the event had been stored by then."""
        if self.seq is not None:
            return stored.seq <= self.seq
        return self.at is None or stored.stored_at <= self.at

    def __str__(self) -> str:
        return f"sequence {self.seq}" if self.seq is not None else f"{self.at.isoformat() if self.at else 'now'}"


def parse_as_of(seq: str | None, at: str | None) -> AsOf | None:
    """The as-of point of ``as_of_seq`` or ``as_of`` (None for neither); ``BadAsOf`` says what is wrong."""
    if seq is not None and at is not None:
        raise BadAsOf("give as_of_seq or as_of, not both")
    if seq is not None:
        return AsOf(seq=_sequence(seq))
    if at is not None:
        return AsOf(at=parse_time(at))
    return None


def _sequence(text: str) -> int:
    """``as_of_seq`` as a number from 0 to the largest log sequence."""
    found = re.fullmatch(r"\s*(-?)0*([0-9]+)\s*", text)
    if found is None:
        raise BadAsOf(f"as_of_seq={_shown(text)!r} is not a log sequence (a whole number, 0 or more)")
    sign, digits = found.groups()
    if sign and digits != "0":
        raise BadAsOf(f"as_of_seq=-{_shown(digits)} is negative: log sequences start at 1 (0 is before the first event)")
    # Compared as text first: Python refuses to convert more than 4300 digits.
    if len(digits) > len(str(MAX_SEQ)) or int(digits) > MAX_SEQ:
        raise BadAsOf(f"as_of_seq={_shown(digits)} is beyond any log sequence (0 to {MAX_SEQ})")
    return int(digits)


def _shown(text: str) -> str:
    """A parameter as an error message quotes it: at most 30 characters."""
    return text if len(text) <= 30 else f"{text[:30]}..."


def parse_time(text: str) -> datetime:
    """An ISO 8601 time with a zone (``2026-11-30T12:00:00Z``), as the log's stored times compare with it."""
    # An unencoded "+00:00" in a query string arrives as " 00:00": read it as the offset it was.
    text = re.sub(r" ([0-9]{2}:?[0-9]{2})$", r"+\1", text.strip())
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadAsOf(f"as_of={text!r} is not an ISO 8601 time (for example 2026-11-30T12:00:00Z)") from None
    if moment.tzinfo is None:
        raise BadAsOf(f"as_of={text!r} needs a time zone (for example 2026-11-30T12:00:00Z)")
    return moment


def is_claim_id(key: str) -> bool:
    """Whether a claim key is an id (CLM-0338) rather than a slug."""
    return re.fullmatch(CLAIM_ID_PATTERN, key) is not None


def records(claim_id: str, stored: Iterable[StoredEvent], as_of: AsOf | None = None, *, gate: Gate | None = None) -> Iterator[Record]:
    """The claim's admitted events up to ``as_of``, as the projector folds them (the refused skipped)."""
    for item, event in _readable(claim_id, stored, as_of, gate=gate):
        yield Record(item.seq, item.stored_at, event)


def _readable(
    claim_id: str, stored: Iterable[StoredEvent], as_of: AsOf | None, folded: Mapping[Key, int] | None = None, *,
    gate: Gate | None = None, start: ClaimPage | None = None,
) -> Iterator[tuple[StoredEvent, Event]]:
    """The claim's events the gate admits (services/admission/), up to ``as_of`` (``folded``: the event ids
    admitted before ``stored``, with where; ``start``: the page they follow, whose facts the rules read).
    ``gate``: the key registry's (without one, none is required)."""
    facts = {claim_id: facts_of(start, claim_id)} if start is not None else None
    in_order = InOrder(gate or Gate(), folded=folded, facts=facts)
    for item in stored:
        if as_of is not None and not as_of.includes(item):
            return  # stored times and sequences only grow: nothing later was stored by then
        verdict = in_order.admit(item)
        if isinstance(verdict, Admitted) and verdict.event.claim_id == claim_id:
            yield item, verdict.event


def fold_page(
    claim_id: str,
    stored: Iterable[StoredEvent],
    as_of: AsOf | None = None,
    *,
    start: ClaimPage | None = None,
    folded: Mapping[Key, int] | None = None,
    gate: Gate | None = None,
) -> ClaimPage | None:
    """The claim's page as it stood at ``as_of`` (None if it was not drafted by then): its events folded
    from the first, or from ``start`` (a snapshot) on with the events stored after it (``folded``: the
    event ids the snapshot folded that they may repeat)."""
    page = start
    for item, event in _readable(claim_id, stored, as_of, folded, gate=gate, start=start):  # the records, without building each one
        page = apply(page, event, item.seq, item.stored_at)
    return derive(page) if page is not None else None


async def page_json_as_of(
    claim_log: ClaimLog,
    claim_id: str,
    as_of: AsOf | None,
    *,
    cache: ClaimEvents | None = None,
    snapshots: Engine | None = None,
) -> bytes | None:
    """The claim's page as JSON as it stood at ``as_of`` (None if not drafted by then), reading only this claim's
    events: with ``snapshots`` (the read models' database), only those after its last snapshot at or before
    ``as_of``; with a cache, only those it does not know yet."""
    up_to = as_of.seq if as_of is not None else None
    if up_to == 0:
        return None
    snapshot = latest_snapshot(snapshots, claim_id, as_of) if snapshots is not None else None
    if snapshot is not None:
        return await _page_from_snapshot(claim_log, claim_id, as_of, snapshot, snapshots)
    if cache is None:
        stored = await claim_log.read_claim(claim_id, up_to_seq=up_to)
    else:
        stored = await cache.read(claim_log, claim_id, up_to_seq=up_to)
    included = list(itertools.takewhile(as_of.includes, stored)) if as_of is not None else stored
    if not included:
        return None
    doc = cache.page(claim_id, included[-1].seq) if cache is not None else None
    if doc is None:
        page = fold_page(claim_id, included, gate=await gate_for(claim_log, (item.signature for item in included)))
        doc = PAGE.dump_json(page) if page is not None else None
        if cache is not None and doc is not None:
            cache.keep_page(claim_id, included[-1].seq, doc)
    return doc


@dataclass(frozen=True)
class Snapshot:
    """A claim's page as the projector folded it through sequence ``seq`` (projections/claim_pages.py)."""

    seq: int
    doc: str
    read_up_to: int | None = None  # for a point in time: no event after this sequence was stored by then


def latest_snapshot(engine: Engine, claim_id: str, as_of: AsOf | None) -> Snapshot | None:
    """The claim's last snapshot at or before ``as_of`` (its last of all for None)."""
    query = select(page_snapshots.c.seq, page_snapshots.c.at).where(page_snapshots.c.claim_id == claim_id)
    if as_of is not None and as_of.seq is not None:
        query = query.where(page_snapshots.c.seq <= as_of.seq)
    by_time = as_of is not None and as_of.at is not None
    with engine.connect() as conn:
        # A claim has one snapshot per SNAPSHOT_EVERY events: few enough to pick by time here, where
        # times compare as times whatever text a database keeps them as.
        taken = sorted(conn.execute(query).all())
        before = [seq for seq, at in taken if not by_time or _utc(at) <= as_of.at]
        if not before:
            return None
        seq = before[-1]
        doc = conn.execute(
            select(page_snapshots.c.doc).where(page_snapshots.c.claim_id == claim_id, page_snapshots.c.seq == seq)
        ).scalar_one()
    # Stored times only grow with sequences: the next snapshot was stored after the point, and so was
    # every later event, so the read stops there instead of at the claim's head.
    after = [later for later, _ in taken if later > seq] if by_time else []
    return Snapshot(seq, doc, after[0] if after else None)


def _folded_by(engine: Engine, snapshot: Snapshot, stored: list[StoredEvent]) -> dict[Key, int]:
    """Of the ids of ``stored`` (events after the snapshot), those the snapshot's page folded already."""
    keys = set()
    for item in stored:
        with contextlib.suppress(UnknownEventError):
            keys.add(key_of(item.event))  # of every message, admitted or not: the lookup only narrows
    with engine.connect() as conn:
        return {key: seq for key, seq in folded_before(conn, keys).items() if seq <= snapshot.seq}


async def _page_from_snapshot(claim_log: ClaimLog, claim_id: str, as_of: AsOf | None, snapshot: Snapshot, snapshots: Engine) -> bytes:
    up_to = as_of.seq if as_of is not None and as_of.seq is not None else snapshot.read_up_to
    stored = await claim_log.read_claim(claim_id, after_seq=snapshot.seq, up_to_seq=up_to)
    included = list(itertools.takewhile(as_of.includes, stored)) if as_of is not None else stored
    if not included:  # nothing stored after the snapshot by then: the page is the snapshot
        return snapshot.doc.encode()
    gate = await gate_for(claim_log, (item.signature for item in included))
    page = fold_page(claim_id, included, start=PAGE.validate_json(snapshot.doc), folded=_folded_by(snapshots, snapshot, included), gate=gate)
    assert page is not None  # the snapshot's page is there to fold into
    return PAGE.dump_json(page)


def _utc(moment: datetime) -> datetime:
    """A time a database returned, as an aware UTC time (SQLite returns the UTC time it was given, naive)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
