"""The terminal's claim page and history say what the HTML page says, in as few lines as the change needs."""

from __future__ import annotations

from rich.console import Console

from services.cli.timeline import _change, _status_line


def plain(renderable) -> str:
    console = Console(width=80, record=True, color_system=None)
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
              "moves_standing": False, "standing": "validated", "counts_toward_scorecard": False}
    line = _status_line(status)
    assert "validated" not in line and "moves no standing, left out of the scorecard" in line
    reviewed = {**status, "review_state": "reviewed by a person", "unreviewed_model_draft": False,
                "moves_standing": True, "counts_toward_scorecard": True}
    assert "standing validated" in _status_line(reviewed)
