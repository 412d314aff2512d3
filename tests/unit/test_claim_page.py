"""The claim-page fold: what a page shows after each kind of event."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from events import Actor, Event
from projections.base import Record
from projections.claim_page import apply, derive, fold
from projections.page_model import PAGE
from tests.builders import (
    MODEL,
    PERSON,
    attached,
    drafted,
    filed,
    history,
    resolved,
    retracted,
    review_withdrawn,
    reviewed,
    revised,
    withdrawn,
)

CLAIM = "CLM-0001"


def page_of(events: list[Event]):
    return fold(Record(seq, datetime(2026, 11, 30, tzinfo=UTC), e) for seq, e in enumerate(events, start=1))


def test_withdrawn_source_stays_on_the_page_but_leaves_the_counts():
    page = page_of([drafted(CLAIM), attached(CLAIM, "s1"), attached(CLAIM, "s2"), withdrawn(CLAIM, "s1")])
    assert [s.source_id for s in page.sources] == ["s1", "s2"]
    assert page.sources[0].state == "withdrawn"
    assert page.sources[0].withdrawn.stamp.by == PERSON
    assert page.counts.sources_active == 1
    assert page.counts.sources_withdrawn == 1
    assert page.counts.sources_by_relation["validates"] == 1


def test_every_source_keeps_who_brought_it():
    page = page_of([drafted(CLAIM), attached(CLAIM, "s1", actor=PERSON)])
    assert page.sources[0].brought.by == PERSON
    assert page.sources[0].brought.seq == 2


def test_unreviewed_model_draft_is_visible_but_does_not_count_toward_the_scorecard():
    page = page_of([drafted(CLAIM, actor=MODEL)])
    assert page.status.unreviewed_model_draft
    assert not page.status.counts_toward_scorecard
    assert not page.status.moves_standing
    assert page.status.review_state == "unreviewed"


def test_the_stored_page_carries_moves_standing_as_the_scorecard_rule_says():
    for actor, expected in ((MODEL, False), (PERSON, True)):
        doc = json.loads(PAGE.dump_json(page_of([drafted(CLAIM, actor=actor)])))
        assert doc["status"]["moves_standing"] is doc["status"]["counts_toward_scorecard"] is expected
        assert PAGE.validate_python(doc).status.moves_standing is expected


def test_an_unreviewed_model_draft_names_its_evidence_and_counts_no_standing():
    draft = [drafted(CLAIM, actor=MODEL), attached(CLAIM, "s1", relation="validates")]
    doc = json.loads(PAGE.dump_json(page_of(draft)))["status"]
    assert doc["evidence"] == "validated" and doc["counted_standing"] is None and doc["moves_standing"] is False
    assert doc["standing"] == "validated"  # deprecated: kept until removed, as CHANGELOG.md says
    reviewed_doc = json.loads(PAGE.dump_json(page_of([*draft, reviewed(CLAIM, "r1", "person")])))["status"]
    assert reviewed_doc["evidence"] == reviewed_doc["counted_standing"] == "validated"
    assert PAGE.validate_python({**json.loads(PAGE.dump_json(page_of(draft)))}).status.counted_standing is None


def test_a_review_makes_a_model_draft_count_and_withdrawing_it_undoes_that():
    reviewed_page = page_of([drafted(CLAIM), reviewed(CLAIM, "r1", "person")])
    assert reviewed_page.status.counts_toward_scorecard
    assert reviewed_page.status.review_state == "reviewed by a person"
    page = page_of([drafted(CLAIM), reviewed(CLAIM, "r1", "person"), review_withdrawn(CLAIM, "r1")])
    assert not page.status.counts_toward_scorecard
    assert page.counts.reviews_person == 0


def test_a_model_draft_counts_once_a_person_or_another_model_reviewed_it():
    for reviewer, kind in ((PERSON, "person"), (Actor(id="critic", kind="model", model="other-model"), "ai")):
        page = page_of([drafted(CLAIM, actor=MODEL), reviewed(CLAIM, "r1", kind, actor=reviewer)])
        assert page.status.counts_toward_scorecard and not page.status.unreviewed_model_draft


def test_a_person_draft_counts_without_review():
    page = page_of([drafted(CLAIM, actor=PERSON)])
    assert page.status.counts_toward_scorecard


def test_disagreements_move_from_open_to_resolved():
    page = page_of([drafted(CLAIM), filed(CLAIM, "d1"), filed(CLAIM, "d2"), resolved(CLAIM, "d1", "upheld")])
    assert page.counts.disagreements_open == 1
    assert page.counts.disagreements_resolved == 1
    assert page.disagreements[0].outcome == "upheld"


def test_a_revision_keeps_the_falsifier_as_drafted():
    page = page_of([drafted(CLAIM, falsifier="Original."), revised(CLAIM, falsifier="Revised.")])
    assert page.revision == 2
    assert page.notes.falsifier_as_drafted == "Original."
    assert page.notes.falsifier_now == "Revised."


def test_retracted_claim_leaves_the_scorecard_but_keeps_its_page():
    page = page_of([drafted(CLAIM, actor=PERSON), attached(CLAIM), retracted(CLAIM)])
    assert page.status.lifecycle == "retracted"
    assert not page.status.counts_toward_scorecard
    assert len(page.sources) == 1


def test_events_before_the_draft_change_no_page():
    assert page_of([attached(CLAIM)]) is None


def test_counts_equal_the_lengths_of_their_lists_after_a_whole_history():
    page = page_of(history(CLAIM))
    active = [s for s in page.sources if s.state == "active"]
    assert page.counts.sources_active == len(active) == 2
    assert page.counts.sources_withdrawn == 1
    assert page.counts.disagreements_open == 1 and page.counts.disagreements_resolved == 1
    assert page.counts.reviews_ai == 1 and page.counts.reviews_person == 1
    assert page.as_of_seq == len(history(CLAIM))


def test_standing_follows_the_rules_in_docs_scorecard_md():
    from projections.scorecard import standing

    assert standing({}) == "untested"
    assert standing({"qualifies": 2, "mentions": 1}) == "untested"
    assert standing({"validates": 1, "supports": 3}) == "validated"
    assert standing({"supports": 1}) == "supported"
    assert standing({"supports": 1, "contradicts": 1}) == "contested"
    assert standing({"validates": 1, "contradicts": 2}) == "contested"
    assert standing({"contradicts": 1, "qualifies": 1}) == "refuted"


def test_a_page_read_back_from_json_folds_on_like_the_page_that_was_stored():
    folded = page_of([drafted(CLAIM), attached(CLAIM, "s1"), attached(CLAIM, "s2"), withdrawn(CLAIM, "s1")])
    stored = PAGE.dump_json(folded)
    assert "_index" not in json.loads(stored) and "_index" not in repr(folded)
    read_back = PAGE.validate_json(stored)
    assert read_back == folded
    at = datetime(2026, 12, 1, tzinfo=UTC)
    for page in (folded, read_back):
        derive(apply(page, withdrawn(CLAIM, "s2"), 5, at))
    assert read_back == folded and folded.counts.sources_withdrawn == 2
