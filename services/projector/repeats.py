"""The projector's side of repeats (projections/repeats.py): a batch's event ids against those its
claims folded before, in the batch's transaction.

The ids a batch folds are written to ``folded_events`` with it, so what the projector holds in memory
is the batch's own ids, however long the log; a repeat goes to ``unreadable_events`` with the sequence
of the first, and no projection sees it. Repeats are rare: a batch first inserts its ids, skipping those
there already, and only when it inserted fewer rows than ids looks them up; the lookup of every batch's
ids cost about as much as the insert. (Not a savepoint around a failing insert: on SQLite, a savepoint
that opens the transaction commits it when released.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from sqlalchemy import Connection

from projections.base import Record
from projections.repeats import folded_before, key_of, repeat_reason, split_repeats
from projections.sql import insert_new_values
from projections.tables import folded_events

log = logging.getLogger(__name__)


def without_repeats(conn: Connection, records: Sequence[Record], subjects: Mapping[int, str]) -> tuple[list[Record], list[dict]]:
    """The records to fold, their ids recorded as folded; and the ``unreadable_events`` rows of the repeats."""
    if not records:
        return [], []
    fresh, repeated = split_repeats(records)  # the repeats within the batch
    inserted = insert_new_values(conn, folded_events, _rows(fresh))
    if inserted != len(fresh) or not conn.dialect.supports_sane_multi_rowcount:
        # An id of the batch was folded by an earlier one. The ids just inserted are found at their
        # own sequence, which makes them no repeats.
        fresh, repeated = split_repeats(records, folded_before(conn, {key_of(r.event) for r in records}))
    rows = []
    for record, first in repeated:
        reason = repeat_reason(record.event.event_id, first)
        rows.append({"seq": record.seq, "subject": subjects[record.seq], "reason": reason})
        log.error("unreadable event at sequence %s (%s): %s", record.seq, subjects[record.seq], reason)
    return fresh, rows


def _rows(records: list[Record]) -> list[tuple[str, str, int]]:
    return [(r.event.event_id, r.event.claim_id, r.seq) for r in records]
