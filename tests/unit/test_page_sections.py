"""The disagreements and reviews sections of the registry's text, and who brought a source: parsed, rendered back,
imported with who wrote them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from events import Actor
from events.disagreement import DisagreementAnswered, DisagreementFiled, DisagreementResolved
from events.review import ReviewRecorded, ReviewWithdrawn
from events.source import SourceAttached
from projections.base import Record
from projections.claim_page import fold
from services.ingest.importer import PAGE_IMPORTER, ImportContext, decide_import, source_id
from services.ingest.page_format import PageFormatError, parse_page, render_page

SAMPLE = (Path(__file__).resolve().parents[2] / "services/ingest/samples/CLM-0631.txt").read_text()
LINES = SAMPLE.split("\n")
INVITATION = LINES.index("Related claims") - 1
DISAGREEMENTS = [
    "Disagreements",
    "- Filed by alice (person) about source 1: Joint training was given half the steps.",
    "  Evidence: Table 7, appendix B",
    "  Answered by reviewer-7 (model: judge model 2 (preview)): The appendix says the steps match.",
    "  Answered by bob (person): Both ran 300 steps;",
    "    the table's caption is wrong.",
    "  Rejected by carol (person).",
    "- Filed by ingest-bot (service): Only one topology.",
]
REVIEWS = [
    "Reviews",
    "- Sound, confidence medium, of revision 1, by carol (person): Holds at 3B.",
    "- Unsound, confidence low, of revision 1, by reviewer-7 (model: judge model 2 (preview)).",
    "  Withdrawn by reviewer-7 (model: judge model 2 (preview)): Read the wrong table.",
]
TEXT = "\n".join(LINES[:INVITATION] + DISAGREEMENTS + [LINES[INVITATION]] + REVIEWS + LINES[INVITATION + 1 :])
CTX = ImportContext(actor=PAGE_IMPORTER, now=datetime(2026, 12, 1, tzinfo=UTC), correlation_id="import-1")


def test_disagreements_and_reviews_are_read_with_who_wrote_each_part():
    page = parse_page(TEXT, "CLM-0631.txt")
    first, second = page.disagreements
    assert (first.filed.writer, first.source, first.evidence) == (Actor(id="alice", kind="person"), 1, "Table 7, appendix B")
    assert [a.writer.model for a in first.answers] == ["judge model 2 (preview)", None]
    assert first.answers[1].text == "Both ran 300 steps;\nthe table's caption is wrong."
    assert (first.outcome, first.resolved.writer.id, first.resolved.text) == ("rejected", "carol", None)
    assert (second.filed.writer.kind, second.source, second.resolved) == ("service", None, None)
    sound, withdrawn = page.reviews
    assert (sound.verdict, sound.confidence, sound.revision, sound.recorded.text) == ("sound", "medium", 1, "Holds at 3B.")
    assert (withdrawn.recorded.text, withdrawn.withdrawn.text) == (None, "Read the wrong table.")


def test_a_page_with_the_new_sections_renders_back_byte_for_byte_and_one_without_them_is_unchanged():
    assert render_page(parse_page(TEXT)) == TEXT
    assert render_page(parse_page(SAMPLE)) == SAMPLE


@pytest.mark.parametrize(
    ("line", "replacement", "at", "problem"),
    [
        (1, "- Filed by alice (person) about source 2: x", 1, "about source 2, but the page lists 1 source(s)"),
        (1, "- Filed by alice: x", 1, 'expected a disagreement "- Filed by <who>'),
        (1, "- Filed by alice (robot): x", 1, "expected a disagreement"),
        (5, "  Upheld by carol (person).", 6, 'then "  Upheld|Rejected|Withdrawn by <who>[: note]"'),  # twice resolved
        (6, "  Resolved by carol (person).", 6, 'expected "  Evidence: ..."'),
    ],
)
def test_a_disagreement_that_breaks_the_format_names_its_line(line, replacement, at, problem):
    start = INVITATION + 1  # the "Disagreements" heading's line number
    lines = TEXT.split("\n")
    lines[start - 1 + line] = replacement
    with pytest.raises(PageFormatError) as caught:
        parse_page("\n".join(lines), "p.txt")
    assert caught.value.line == start + at and problem in caught.value.problem


def test_a_review_that_breaks_the_format_names_its_line():
    lines = TEXT.split("\n")
    at = lines.index(REVIEWS[1])
    lines[at] = "- Sound, confidence sure, of revision 1, by carol (person)."
    with pytest.raises(PageFormatError, match=f"p.txt:{at + 1}: expected a review"):
        parse_page("\n".join(lines), "p.txt")
    lines[at] = REVIEWS[1]
    lines[at + 3] = "  Withdrawn by carol (person)."
    with pytest.raises(PageFormatError, match=f"p.txt:{at + 4}: expected \"  Withdrawn by <who>: <reason>\""):
        parse_page("\n".join(lines), "p.txt")


def test_imported_disagreements_and_reviews_are_the_importers_with_who_the_page_names():
    page = parse_page(TEXT, "CLM-0631.txt")
    events = decide_import(page, None, CTX)
    said = [e for e in events if isinstance(e, (DisagreementFiled, DisagreementAnswered, DisagreementResolved,
                                                 ReviewRecorded, ReviewWithdrawn))]
    assert [type(e).__name__ for e in said] == ["DisagreementFiled", "DisagreementAnswered", "DisagreementAnswered",
                                               "DisagreementResolved", "DisagreementFiled", "ReviewRecorded",
                                               "ReviewRecorded", "ReviewWithdrawn"]
    assert all(e.actor == PAGE_IMPORTER and e.imported_from == "CLM-0631.txt" for e in said)
    assert [e.written_by.id for e in said] == ["alice", "reviewer-7", "bob", "carol", "ingest-bot", "carol",
                                               "reviewer-7", "reviewer-7"]
    assert said[0].source_id == source_id("CLM-0631", page.sources[0])
    assert [e.reviewer_kind for e in said if isinstance(e, ReviewRecorded)] == ["person", "ai"]
    folded = fold(Record(seq, CTX.now, e) for seq, e in enumerate(events, start=1))
    assert folded.disagreements[0].filed.written_by.id == "alice" and folded.disagreements[0].filed.by == PAGE_IMPORTER
    assert folded.disagreements[0].resolved.imported_from == "CLM-0631.txt"
    assert (folded.status.review_state, folded.status.unreviewed_model_draft) == ("reviewed by a person", False)
    assert decide_import(page, folded, CTX) == []  # importing it again adds nothing


def test_a_later_import_adds_only_the_answers_and_outcomes_the_log_lacks():
    lines = TEXT.split("\n")
    earlier = "\n".join(line for line in lines if line not in (DISAGREEMENTS[6], REVIEWS[3]) and "bob" not in line
                        and "caption" not in line)
    first = decide_import(parse_page(earlier, "CLM-0631.txt"), None, CTX)
    held = fold(Record(seq, CTX.now, e) for seq, e in enumerate(first, start=1))
    later = decide_import(parse_page(TEXT, "CLM-0631.txt"), held, CTX)
    assert [(type(e).__name__, e.written_by.id) for e in later] == [
        ("DisagreementAnswered", "bob"), ("DisagreementResolved", "carol"), ("ReviewWithdrawn", "reviewer-7")]


SOURCE = next(at for at, line in enumerate(LINES) if line.startswith("- Validated by: "))
BROUGHT = "  Brought by alice (person)."
ATTRIBUTED = "\n".join(LINES[: SOURCE + 1] + [BROUGHT] + LINES[SOURCE + 1 :])


def test_a_source_may_say_who_brought_it_and_renders_back_byte_for_byte():
    page = parse_page(ATTRIBUTED, "CLM-0631.txt")
    assert page.sources[0].brought == Actor(id="alice", kind="person")
    assert parse_page(SAMPLE).sources[0].brought is None  # the registry's own pages say no one
    assert render_page(page) == ATTRIBUTED
    model = ATTRIBUTED.replace(BROUGHT, "  Brought by reader-2 (model: judge model 2 (preview)).")
    assert parse_page(model).sources[0].brought.model == "judge model 2 (preview)"
    assert render_page(parse_page(model)) == model


@pytest.mark.parametrize(
    ("replacement", "problem"),
    [
        ("  Brought by alice.", 'expected who brought the source above, "  Brought by <who> (person|service|model'),
        ("  Brought by alice (robot).", "expected who brought the source above"),
        ("  Brought by alice (person): she found it.", "expected who brought the source above"),
        ("  Brought by alice (person)", "expected who brought the source above"),
        ("  Attached by alice (person).", 'found "  Attached by alice (person)."'),
        (f"  Brought by bot (model: {'m' * 501}).", "who brought it: String should have at most 500 characters"),
    ],
)
def test_a_malformed_brought_by_line_names_its_line(replacement, problem):
    text = ATTRIBUTED.replace(BROUGHT, replacement)
    with pytest.raises(PageFormatError) as caught:
        parse_page(text, "p.txt")
    assert (caught.value.path, caught.value.line) == ("p.txt", SOURCE + 2) and problem in caught.value.problem


def test_a_second_brought_by_line_under_one_source_names_its_line():
    text = ATTRIBUTED.replace(BROUGHT, BROUGHT + "\n  Brought by bob (person).")
    with pytest.raises(PageFormatError, match=f'p.txt:{SOURCE + 3}: expected one "Brought by <who>." line under a'):
        parse_page(text, "p.txt")


def test_an_imported_source_is_the_importers_with_who_the_page_says_brought_it():
    page = parse_page(ATTRIBUTED, "CLM-0631.txt")
    [source] = [e for e in decide_import(page, None, CTX) if isinstance(e, SourceAttached)]
    assert (source.actor, source.imported_from, source.written_by) == (PAGE_IMPORTER, "CLM-0631.txt", page.sources[0].brought)
    assert source.source_id == source_id("CLM-0631", parse_page(SAMPLE).sources[0])  # who brought it is no part of its id
    folded = fold(Record(seq, CTX.now, e) for seq, e in enumerate(decide_import(page, None, CTX), start=1))
    brought = folded.sources[0].brought
    assert (brought.by, brought.written_by, brought.imported_from) == (PAGE_IMPORTER, page.sources[0].brought, "CLM-0631.txt")
    assert decide_import(page, folded, CTX) == []  # importing it again adds nothing
    unnamed = fold(Record(seq, CTX.now, e) for seq, e in enumerate(decide_import(parse_page(SAMPLE, "CLM-0631.txt"), None, CTX), start=1))
    assert (unnamed.sources[0].brought.written_by, unnamed.sources[0].brought.imported_from) == (None, None)
