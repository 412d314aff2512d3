"""Repeats: an event whose ``event_id`` its actor has already folded on its claim is never folded again.

An event id names one event of its actor on its claim (docs/events.md): the same id sent by two actors
is two events, both folded, so an id one actor chose (or derived from another's ``Idempotency-Key``,
whose namespace is public) blocks nothing of another's. JetStream drops a second publish of the
same message only within its duplicate window: the same event published again after it, or with
another ``Nats-Msg-Id`` by a producer writing to the log directly, is stored again. Whatever its bytes,
the first event of a claim carrying an id by one actor is folded and every later one by that actor is
a repeat, which no
projection sees and the projector records as unreadable, with the sequence of the first.

The rule reads only the claim's own events in log order, so a claim decides it alike in any
partition, batch or replay. Ids are per claim: a registry-wide rule would depend on the order in
which partitions folded their claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, bindparam, select

from events import Event
from projections.base import Record
from projections.sql import chunks
from projections.tables import folded_events

Key = tuple[str, str, str]  # (claim_id, actor_id, event_id)
REPEAT_REASON_PREFIX = "repeat:"


def repeat_reason(event_id: str, first_seq: int) -> str:
    """Why a repeat is not folded, as ``unreadable_events`` and a claim's history record it."""
    return f"{REPEAT_REASON_PREFIX} event_id {event_id} already folded at seq {first_seq}"


def key_of(event: Event) -> Key:
    """The claim, actor and event id a repeat is recognised by."""
    return event.claim_id, event.actor.id, event.event_id


class Repeats:
    """Tells each record in log order whether it repeats an id its actor folded on its claim before.

    ``folded``: the ids folded before these records, with where (the projector's ``folded_events``
    rows of the batch's ids); the ids met here are remembered, so what it holds is bounded by the
    records given to it.
    """

    def __init__(self, folded: Mapping[Key, int] | None = None) -> None:
        self._first: dict[Key, int] = dict(folded or {})

    def earlier(self, event: Event, seq: int) -> int | None:
        """The sequence the event's id was first folded at when the event (stored at ``seq``) repeats it;
        None when it is the first (not remembered: ``first_seq`` remembers it once it is folded)."""
        first = self._first.get((event.claim_id, event.actor.id, event.event_id))
        return first if first is not None and first < seq else None

    def first_seq(self, event: Event, seq: int) -> int | None:
        """The sequence the event's id was first folded at when the event (stored at ``seq``) repeats
        it; None when it is the first (it is remembered as such)."""
        first = self._first.setdefault((event.claim_id, event.actor.id, event.event_id), seq)
        return first if first < seq else None


def split_repeats(records: Iterable[Record], folded: Mapping[Key, int] | None = None) -> tuple[list[Record], list[tuple[Record, int]]]:
    """The records to fold, in order, and the repeats, each with the sequence its id was first folded at."""
    repeats, fresh, repeated = Repeats(folded), [], []
    for record in records:
        first = repeats.first_seq(record.event, record.seq)
        if first is None:
            fresh.append(record)
        else:
            repeated.append((record, first))
    return fresh, repeated


_FOLDED = select(folded_events.c.event_id, folded_events.c.claim_id, folded_events.c.actor_id, folded_events.c.seq).where(
    folded_events.c.event_id.in_(bindparam("ids", expanding=True))
)


def folded_before(conn: Connection, keys: set[Key]) -> dict[Key, int]:
    """Of ``keys``, those ``folded_events`` holds, with the sequence of their first event."""
    found = {}
    for ids in chunks(sorted({event_id for _, _, event_id in keys})):
        for event_id, claim_id, actor_id, seq in conn.execute(_FOLDED, {"ids": ids}):
            if (claim_id, actor_id, event_id) in keys:
                found[claim_id, actor_id, event_id] = seq
    return found
