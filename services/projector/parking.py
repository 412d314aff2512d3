"""Poison events: a claim whose event a projection raises on is parked, in order, and every other claim goes on.

The projector applies a batch in one transaction, as always. Only when that fails with an error
that is not the database or NATS being away does it come here: in a fresh transaction it applies the
batch claim by claim, each in a savepoint, and a claim that fails event by event. The event that raises
is parked with the error; that claim's later events are parked behind it ("claim parked after seq N"),
now and in later batches, until ``claimlog parked retry`` applies them. A claim's page depends on its
own events alone, so which events are parked is decided by the log, whatever the batch boundaries:
a replay parks the same ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, Connection, func, insert, select, update
from sqlalchemy.exc import InterfaceError, InternalError, NotSupportedError, ProgrammingError

from projections.base import Projection, Record
from projections.tables import checkpoints, parked_events

log = logging.getLogger(__name__)
# Errors that say the schema or the driver is wrong, not one claim's event: parking would park everything.
SYSTEMIC = (ProgrammingError, InternalError, InterfaceError, NotSupportedError)
REASON_LIMIT = 2000


def lock_checkpoints(conn: Connection, *rows: ColumnElement[bool]) -> None:
    """Take the write lock on the checkpoints first, so the projector and a retry take turns on parked claims.

    ``rows`` narrows it to the checkpoint rows a writer commits (its partition's): writers of other
    partitions go on committing meanwhile, and ``claimlog parked retry``, which locks every row,
    still takes turns with each. On SQLite it also opens the transaction for writing before any
    SAVEPOINT (the driver would otherwise let the outermost savepoint's release commit); the database
    file has one writer at a time there anyway. On PostgreSQL the rows are locked in one order first,
    so that writers taking several at once cannot deadlock.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(select(checkpoints.c.name).where(*rows).order_by(checkpoints.c.name, checkpoints.c.partition).with_for_update())
    conn.execute(update(checkpoints).where(*rows).values(last_seq=checkpoints.c.last_seq))


def parked_claims(conn: Connection, claim_ids: Sequence[str] | None = None) -> dict[str, int]:
    """Parked claims and the sequence of each one's first parked event (of ``claim_ids`` when given)."""
    query = select(parked_events.c.claim_id, func.min(parked_events.c.seq)).group_by(parked_events.c.claim_id)
    if claim_ids is not None:
        query = query.where(parked_events.c.claim_id.in_(list(claim_ids)))
    return dict(conn.execute(query).all())


def parked_count(conn: Connection) -> int:
    """How many events are parked (the metric)."""
    return conn.execute(select(func.count()).select_from(parked_events)).scalar_one()


def parked_rows(conn: Connection, *, claim_id: str | None = None, limit: int | None = None) -> list[dict]:
    """Parked events in log order, of one claim when given."""
    query = select(parked_events).order_by(parked_events.c.seq).limit(limit)
    if claim_id is not None:
        query = query.where(parked_events.c.claim_id == claim_id)
    return [dict(row._mapping) for row in conn.execute(query)]


def park_row(record: Record, subject: str, reason: str) -> dict:
    """The parked_events row of one record."""
    return {
        "seq": record.seq,
        "claim_id": record.event.claim_id,
        "subject": subject,
        "event_type": record.event.type,
        "reason": reason[:REASON_LIMIT],
        "parked_at": datetime.now(UTC),
    }


def behind(seq: int) -> str:
    """Why an event of an already parked claim is parked."""
    return f"claim parked after seq {seq}"


class Parking:
    """Which claims the projector holds back, as the ``parked_events`` table has them."""

    def __init__(self) -> None:
        self.claims: dict[str, int] = {}  # claim -> sequence of its first parked event

    def load(self, conn: Connection) -> None:
        """Read the parked claims (at the projector's start, and after a generation switch)."""
        self.claims = parked_claims(conn)

    def hold_back(
        self, conn: Connection, records: list[Record], subjects: dict[int, str], *, rows: Callable[[], tuple[ColumnElement[bool], ...]] = tuple
    ) -> tuple[list[Record], list[dict], bool]:
        """The records to apply, rows parking those of parked claims, and whether a claim was released.

        Costs nothing unless the batch touches a parked claim; then the table is read again under the
        lock of the committing partitions' checkpoint rows (``rows()``: built only then), since ``claimlog parked retry`` (another
        process, which locks them all) may have released it.
        """
        touched = {r.event.claim_id for r in records if r.event.claim_id in self.claims} if self.claims else None
        if not touched:
            return records, [], False
        lock_checkpoints(conn, *rows())
        still = parked_claims(conn, sorted(touched))
        released = touched - still.keys()
        for claim_id in released:
            log.info("claim %s was released from parking: projecting it again", claim_id)
            del self.claims[claim_id]
        rows = [park_row(r, subjects[r.seq], behind(still[r.event.claim_id])) for r in records if r.event.claim_id in still]
        return [r for r in records if r.event.claim_id not in still], rows, bool(released)


def isolate(
    conn: Connection,
    projections: Sequence[Projection],
    records: Sequence[Record],
    subjects: dict[int, str],
    *,
    forget: Callable[[], None],
    never_park: tuple[type[BaseException], ...],
) -> tuple[list[dict], dict[str, int]]:
    """Apply ``records`` claim by claim in savepoints; returns the rows parking what failed, and the newly parked claims.

    ``forget`` drops what projections hold in memory after a savepoint rolls back; an error in
    ``never_park`` is no poison and is raised.
    """
    by_claim: dict[str, list[Record]] = {}
    for record in records:
        by_claim.setdefault(record.event.claim_id, []).append(record)
    rows: list[dict] = []
    newly: dict[str, int] = {}
    for claim_id, claim_records in by_claim.items():
        if _try(conn, projections, claim_records, forget, never_park) is None:
            continue
        for i, record in enumerate(claim_records):
            error = _try(conn, projections, [record], forget, never_park)
            if error is None:
                continue
            reason = f"{type(error).__name__}: {error}"
            log.error("parked claim %s at sequence %s (%s): %s", claim_id, record.seq, record.event.type, reason)
            rows.append(park_row(record, subjects[record.seq], reason))
            rows.extend(park_row(r, subjects[r.seq], behind(record.seq)) for r in claim_records[i + 1 :])
            newly[claim_id] = record.seq
            break
    return rows, newly


def _try(
    conn: Connection,
    projections: Sequence[Projection],
    records: Sequence[Record],
    forget: Callable[[], None],
    never_park: tuple[type[BaseException], ...],
) -> Exception | None:
    savepoint = conn.begin_nested()
    try:
        for projection in projections:
            projection.apply_batch(conn, records)
    except never_park:
        raise
    except Exception as error:
        savepoint.rollback()
        forget()
        return error
    savepoint.commit()
    return None


def write_parked(conn: Connection, rows: list[dict]) -> None:
    """Record parked events (in the batch's transaction, with the checkpoint)."""
    if rows:
        conn.execute(insert(parked_events), rows)
