"""The projector's side of repeats (projections/repeats.py): a batch's event ids against those their
actors folded on their claims before, in the batch's transaction.

The ids a batch folds are written to ``folded_events`` with it, so what the projector holds in memory
is the batch's own ids, however long the log; a repeat goes to ``unreadable_events`` with the sequence
of the first, and no projection sees it. Repeats are rare: a batch first inserts its ids, skipping those
there already, and only when it inserted fewer rows than ids looks them up; the lookup of every batch's
ids cost about as much as the insert. (Not a savepoint around a failing insert: on SQLite, a savepoint
that opens the transaction commits it when released.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from sqlalchemy import Connection, delete

from projections.base import Record
from projections.repeats import Key, Repeats, folded_before, key_of, repeat_reason
from projections.sql import insert_new_values
from projections.tables import folded_events

log = logging.getLogger(__name__)
Judge = Callable[[Record], str | None]  # why a record may not be folded (None: it may)


def without_repeats(
    conn: Connection, records: Sequence[Record], subjects: Mapping[int, str], *, judges: Callable[[], Judge] | None = None
) -> tuple[list[Record], list[dict]]:
    """The records to fold, their ids recorded as folded; and the ``unreadable_events`` rows of the repeats
    and of the events ``judges`` refuses (``services/projector/rules.py``: a judge per pass, each starting
    from the claims' facts before the batch). Both in one pass in log order, as a claim's reader admits
    them: an event the rules refuse is no act of its actor, so a later one with its id is no repeat."""
    if not records:
        return [], []
    taken, _ = _split(records, None, None)  # the repeats within the batch
    inserted = insert_new_values(conn, folded_events, _rows(taken))
    folded = None
    if inserted != len(taken) or not conn.dialect.supports_sane_multi_rowcount:
        # An id of the batch was folded by an earlier one. The ids just inserted are found at their
        # own sequence, which makes them no repeats.
        folded = folded_before(conn, {key_of(r.event) for r in records})
    fresh, refused = _split(records, folded, judges)
    if judges is not None:
        # What the rules refuse takes no id (its row, inserted above at its own sequence, is taken back), and
        # an event after it with its id is then the first: its id is recorded now.
        took = {record.seq for record in taken}
        unfolded(conn, [record for record, _ in refused if record.seq in took])
        if late := [record for record in fresh if record.seq not in took]:
            insert_new_values(conn, folded_events, _rows(late))
    rows = []
    for record, reason in refused:
        rows.append({"seq": record.seq, "subject": subjects[record.seq], "reason": reason})
        log.error("unreadable event at sequence %s (%s): %s", record.seq, subjects[record.seq], reason)
    return fresh, rows


def _split(
    records: Sequence[Record], folded: Mapping[Key, int] | None, judges: Callable[[], Judge] | None
) -> tuple[list[Record], list[tuple[Record, str]]]:
    """The records to fold, in order, and the others with why: a repeat, or what the judge refuses."""
    repeats, judge = Repeats(folded), judges() if judges is not None else None
    fresh, refused = [], []
    for record in records:
        first = repeats.earlier(record.event, record.seq)
        reason = repeat_reason(record.event.event_id, first) if first is not None else judge(record) if judge else None
        if reason is not None:
            refused.append((record, reason))
            continue
        repeats.first_seq(record.event, record.seq)
        fresh.append(record)
    return fresh, refused


def _rows(records: list[Record]) -> list[tuple[str, str, str, int]]:
    return [(r.event.event_id, r.event.claim_id, r.event.actor.id, r.seq) for r in records]


def unfolded(conn: Connection, records: Sequence[Record]) -> None:
    """The ids of ``records`` are not folded after all (refused by the rules: no act of their actors), so a
    later event of the same id is judged as the first, as every reader's gate judges it."""
    for record in records:
        event = record.event
        conn.execute(delete(folded_events).where(
            folded_events.c.event_id == event.event_id, folded_events.c.claim_id == event.claim_id,
            folded_events.c.actor_id == event.actor.id, folded_events.c.seq == record.seq,
        ))
