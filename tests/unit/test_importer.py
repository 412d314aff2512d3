"""Deciding which events a registry page needs, given the claim's current page."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from events import ActorKind, new_event_id
from events.claim import ClaimDrafted, ClaimRetracted, ClaimRevised
from events.imported import PageDrafter
from events.relation import ClaimsRelated
from events.source import SourceAttached
from projections.base import Record
from projections.claim_page import fold
from services.ingest.importer import PAGE_IMPORTER, ImportContext, ImportRefused, decide_import
from services.ingest.pages import read_page, sample_pages

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CTX = ImportContext(actor=PAGE_IMPORTER, now=NOW, correlation_id="import-1")


def sample(claim_id: str):
    return next(read_page(p) for p in sample_pages() if p.stem == claim_id)


def folded(events):
    return fold(Record(seq, NOW, e) for seq, e in enumerate(events, start=1))


def test_a_new_page_is_drafted_as_its_page_says_with_its_sources_and_related_claims():
    events = decide_import(sample("CLM-0338"), None, CTX)
    assert [type(e) for e in events] == [ClaimDrafted, SourceAttached] + [ClaimsRelated] * 5
    assert all(e.correlation_id == "import-1" for e in events)
    # The page says a model drafted it, not which one: that is the page's word, beside the page; the
    # importer appended it. Nor does it say who brought the sources or related the claims.
    assert events[0].drafted_by == PageDrafter(kind="model") and events[0].drafter_kind is ActorKind.MODEL
    assert all(e.actor == PAGE_IMPORTER and e.imported_from == "CLM-0338.txt" for e in events)
    page = folded(events)
    assert page.notes.drafted_by_model and page.notes.drafted.by == PAGE_IMPORTER
    assert page.status.unreviewed_model_draft and not page.status.counts_toward_scorecard
    assert page.sources[0].imported_from == "CLM-0338.txt" and page.sources[0].brought.by == PAGE_IMPORTER
    assert events[0].drafted_confidence == "low"
    assert [e.rank for e in events[2:]] == [1, 2, 3, 4, 5]


def test_importing_the_same_page_again_decides_nothing():
    page = sample("CLM-0338")
    assert decide_import(page, folded(decide_import(page, None, CTX)), CTX) == []


def test_a_changed_statement_becomes_a_revision_and_keeps_everything_else():
    page = sample("CLM-0631")
    current = folded(decide_import(page, None, CTX))
    events = decide_import(replace(page, statement="A narrower statement."), current, CTX)
    assert len(events) == 1 and isinstance(events[0], ClaimRevised)
    assert events[0].statement == "A narrower statement."


def test_a_new_source_on_the_page_is_attached_and_the_old_one_is_not_repeated():
    page = sample("CLM-0501")
    current = folded(decide_import(page, None, CTX))
    extra = replace(page.sources[0], relation="contradicts", measured="A failed replication.")
    events = decide_import(replace(page, sources=(*page.sources, extra)), current, CTX)
    assert [(type(e), e.relation) for e in events] == [(SourceAttached, "contradicts")]


def test_a_page_import_writes_only_what_the_contracts_rules_allow():
    """Every reader's gate refuses an event against the rules (events/rules.py): an import is held to them
    before it publishes, as a command is, so nothing the registry writes is refused."""
    page = sample("CLM-0631")
    events = decide_import(page, None, CTX)
    twice = decide_import(replace(page, sources=page.sources + page.sources), None, CTX)  # a source listed twice is one
    assert [e.type for e in twice] == [e.type for e in events]
    retracted = ClaimRetracted(event_id=new_event_id(), claim_id=page.claim_id, occurred_at=NOW, actor=PAGE_IMPORTER, reason="Wrong.")
    current = folded([*events, retracted])
    with pytest.raises(ImportRefused, match=f"ClaimRevised of {page.claim_id}: {page.claim_id} is retracted: it cannot take ClaimRevised"):
        decide_import(replace(page, statement="A narrower statement."), current, CTX)
