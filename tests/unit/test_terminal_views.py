"""The terminal's claim page and history say what the HTML page says, in as few lines as the change needs."""

from __future__ import annotations

from rich.console import Console

from services.cli.page_view import _disagreements, _related, _sources
from services.cli.page_view import status_line as _status_line
from services.cli.timeline import _change


def plain(renderable, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_a_long_statement_change_shows_the_words_that_changed_on_few_lines():
    before = ("For 1.5B-7B Qwen2.5 backbones trained with RL on multi-hop retrieval QA, giving the policy reversible "
              "memory operations raises F1 over trajectory-reward agentic-RAG baselines.")
    after = before.replace("raises F1", "raises average F1").replace("1.5B-7B", "3B")
    shown = plain(_change("statement", before, after))
    assert len(shown.splitlines()) <= 4
    assert "1.5B-7B" in shown and "3B" in shown and "average" in shown
    assert "multi-hop retrieval" not in shown and "…" in shown  # long unchanged runs are elided


def test_a_short_change_is_shown_whole():
    assert plain(_change("sources.s1.relation", "supports", "validates")).strip() == (
        "sources.s1.relation: 'supports' → 'validates'")


def test_an_unreviewed_model_draft_shows_no_standing():
    status = {"lifecycle": "active", "review_state": "unreviewed", "unreviewed_model_draft": True,
              "moves_standing": False, "standing": "validated", "evidence": "validated", "counted_standing": None,
              "counts_toward_scorecard": False}
    line = _status_line(status)
    assert "validated" not in line and "moves no standing, left out of the scorecard" in line
    reviewed = {**status, "review_state": "reviewed by a person", "unreviewed_model_draft": False,
                "moves_standing": True, "counted_standing": "validated", "counts_toward_scorecard": True}
    assert "standing validated" in _status_line(reviewed)


def test_a_source_from_a_page_shows_whom_the_page_names_or_that_it_names_no_one():
    importer = {"id": "claimlog-ingest", "kind": "service"}
    named = {"source_id": "src-1", "relation": "validates", "measured": "F1.", "state": "active", "imported_from": "p.txt",
             "brought": {"by": importer, "written_by": {"id": "alice", "kind": "person"}, "imported_from": "p.txt"}}
    unnamed = {**named, "source_id": "src-2", "brought": {"by": importer, "written_by": None, "imported_from": None}}
    shown = " ".join(plain(_sources({"sources": [named, unnamed]}), width=400).split())
    assert "alice (person) (as p.txt says; imported by claimlog-ingest (service))" in shown
    assert "not stated on p.txt; imported by claimlog-ingest (service)" in shown
    assert shown.count("not stated") == 1


def test_a_pages_own_words_in_square_brackets_are_shown_not_read_as_console_markup():
    """A statement may name a placeholder like "[answer]"; the terminal printed it as an unknown style, so it vanished."""
    related = {"claim_id": None, "statement": "The prompt ends with the literal placeholder [answer] for the patch.",
               "capability": "Using the tools it is given [beta]", "review_label": "reviewed by AI"}
    shown = " ".join(plain(_related({"related": [related]}), width=400).split())
    assert "placeholder [answer] for the patch." in shown and "given [beta]" in shown
    resolved = {"disagreement_id": "d1", "argument": "Too few seeds.", "filed": {"by": {"id": "ada", "kind": "person"}},
                "state": "resolved", "outcome": "rejected", "resolution_note": "See [appendix] B.",
                "resolved": {"by": {"id": "ada", "kind": "person"}}, "answers": []}
    assert "See [appendix] B." in " ".join(plain(_disagreements({"disagreements": [resolved]}), width=400).split())
