"""Repeats: the fold folds the first event of a claim carrying an event id, and no later one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from projections.base import Record
from projections.claim_page import fold
from projections.page_model import PAGE
from projections.repeats import repeat_reason, split_repeats
from tests.builders import BOT, PERSON, attached, drafted, filed, withdrawn

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def records(events, first_seq: int = 1) -> list[Record]:
    return [Record(first_seq + i, T0 + timedelta(seconds=i), event) for i, event in enumerate(events)]


def test_a_repeated_event_id_is_folded_once_wherever_it_comes_again():
    draft, source, gone = drafted("CLM-0001"), attached("CLM-0001", "s1"), withdrawn("CLM-0001", "s1")
    once = fold(records([draft, source, gone]))
    # The attach again after its withdrawal (it would bring the source back), the draft again, the
    # withdrawal again, each as a new stored event.
    again = fold(records([draft, source, gone, source, draft, gone]))
    assert PAGE.dump_json(again) == PAGE.dump_json(once)
    assert again.counts.sources_active == 0 and again.counts.sources_withdrawn == 1 and again.event_count == 3


def test_a_repeat_is_named_with_where_its_id_was_first_folded_in_this_batch_or_an_earlier_one():
    draft, source, dispute = drafted("CLM-0001"), attached("CLM-0001", "s1"), filed("CLM-0001", "d1")
    batch = records([source, dispute, source], first_seq=10)
    fresh, repeated = split_repeats(batch, {("CLM-0001", draft.actor.id, draft.event_id): 3, ("CLM-0001", dispute.actor.id, dispute.event_id): 7})
    assert [r.seq for r in fresh] == [10]
    assert [(r.seq, first) for r, first in repeated] == [(11, 7), (12, 10)]
    assert repeat_reason(source.event_id, 10) == f"repeat: event_id {source.event_id} already folded at seq 10"


def test_an_id_folded_at_the_records_own_sequence_is_no_repeat_and_ids_are_per_claim():
    source = attached("CLM-0001", "s1")
    elsewhere = attached("CLM-0002", "s1", event_id=source.event_id)
    fresh, repeated = split_repeats(records([source, elsewhere], first_seq=5), {("CLM-0001", source.actor.id, source.event_id): 5})
    assert [r.seq for r in fresh] == [5, 6] and repeated == []


def test_one_event_id_sent_by_two_actors_is_two_events_both_folded():
    draft, source = drafted("CLM-0001"), attached("CLM-0001", "s1", actor=BOT)
    dispute = filed("CLM-0001", "d1", actor=PERSON, event_id=source.event_id)
    fresh, repeated = split_repeats(records([draft, source, dispute, dispute]))
    assert [r.seq for r in fresh] == [1, 2, 3] and [(r.seq, first) for r, first in repeated] == [(4, 3)]
    page = fold(records([draft, source, dispute, dispute]))
    assert page.event_count == 3 and page.counts.sources_active == 1 and [d.disagreement_id for d in page.disagreements] == ["d1"]
