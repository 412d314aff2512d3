"""``claimlog show``'s claim page in the terminal: what the HTML page shows (``templates/claim.html``), in the
same words: the slug, each source and its state, each disagreement with its source, evidence, answers and
resolution, each review with its state and why it was withdrawn, each related claim with its capability and
label."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from events.envelope import actor_label
from events.imported import page_drafter_label
from services.ingest.page_format import caveats

WITHDRAWN = "strike dim"


def plain(value: str | None) -> Text:
    """A page's own words as a table cell: never read as console markup ("[answer]" in a statement stays)."""
    return Text(value or "")


def who(actor: dict | None) -> str:
    """An actor of a page's JSON as the HTML page names it."""
    return actor_label(actor["id"], actor["kind"], actor.get("model")) if actor else ""


def said_by(stamp: dict) -> str:
    """Who did it; for a part imported from a page, whom the page names and who imported it."""
    if stamp.get("written_by"):
        return f"{who(stamp['written_by'])} (as {stamp.get('imported_from')} says; imported by {who(stamp['by'])})"
    return who(stamp["by"])


def drafted_by(notes: dict[str, Any]) -> str:
    """Who drafted the claim; for a draft imported from a page, who the page says drafted it and who imported it."""
    drafter, stamp = notes.get("drafted_by"), notes["drafted"]
    if drafter:
        said = page_drafter_label(drafter["kind"], drafter.get("model"))
        return f"{said}; imported by {who(stamp['by'])} from {stamp.get('imported_from')}"
    return said_by(stamp)


def status_line(status: dict[str, Any]) -> str:
    """Lifecycle and review state, and standing only where it moves one: as the HTML page says it."""
    parts = [status["lifecycle"], status["review_state"]]
    if status["unreviewed_model_draft"]:
        parts.append("unreviewed model draft: moves no standing, left out of the scorecard")
    elif status.get("counted_standing"):
        parts.append(f"standing {status['counted_standing']}")
    if not status["unreviewed_model_draft"]:
        parts.append("counts toward the scorecard" if status["counts_toward_scorecard"] else "left out of the scorecard")
    return " · ".join(parts)


def _notes(notes: dict[str, Any]) -> list[str]:
    lines = [f"drafted confidence: {notes['drafted_confidence']}"] if notes.get("drafted_confidence") else []
    if notes.get("falsifier_as_drafted"):
        lines.append(f"falsifier as drafted: {notes['falsifier_as_drafted']}")
    if notes.get("falsifier_now") and notes["falsifier_now"] != notes.get("falsifier_as_drafted"):
        lines.append(f"falsifier now: {notes['falsifier_now']}")
    return lines


def _source_text(source: dict[str, Any]) -> Text:
    """What a source measured, its caveats labelled apart, and whether the text was cut short."""
    text = Text(source["measured"])
    if source.get("breadth"):
        label, caveats_text = caveats(source["breadth"])
        text.append(f"\n{label} ", style="bold").append(caveats_text)
    if source.get("truncated"):
        text.append(" [truncated]", style="dim")
    if source.get("withdrawn"):
        withdrawal = source["withdrawn"]
        text.append(f"\nWithdrawn by {said_by(withdrawal['stamp'])}: {withdrawal['reason']}", style="italic")
    return text


def _state(state: str, withdrawn: bool) -> Text:
    return Text(state, style="bold red" if withdrawn else "")


def _sources(page: dict[str, Any]) -> Table:
    table = Table("source", "relation", "measured", "brought by", "state", title="Sources", title_justify="left")
    for s in page["sources"]:
        brought = said_by(s["brought"])
        if s.get("imported_from") and not s["brought"].get("written_by"):
            brought = f"not stated on {s['imported_from']}; imported by {brought}"
        withdrawn = s["state"] == "withdrawn"
        table.add_row(plain(s["source_id"]), plain(s["relation"]), _source_text(s), plain(brought),
                      _state(s["state"], withdrawn),
                      style=WITHDRAWN if withdrawn else "")
    return table


def _disagreement_text(d: dict[str, Any]) -> Text:
    """The argument, what it is about and with what evidence, then every answer, each with who gave it."""
    text = Text(d["argument"])
    if d.get("source_id"):
        text.append(f"\nabout source {d['source_id']}", style="dim")
    if d.get("evidence"):
        text.append(f"\nevidence: {d['evidence']}", style="dim")
    for answer in d.get("answers") or []:
        text.append(f"\nAnswered by {said_by(answer['stamp'])}: ", style="bold").append(answer["answer"])
    return text


def _disagreement_state(d: dict[str, Any]) -> str:
    """Open (and whether answered), or resolved with its outcome, by whom, and the note: as the HTML page and
    the registry's text say it."""
    if d["state"] != "resolved":
        return "open, answered" if d.get("answers") else "open"
    note = f": {d['resolution_note']}" if d.get("resolution_note") else ""
    return f"resolved\n{d['outcome'].capitalize()} by {said_by(d['resolved'])}{note}"


def _disagreements(page: dict[str, Any]) -> Table:
    table = Table("disagreement", "argument", "filed by", "state", title="Disagreements", title_justify="left")
    for d in page["disagreements"]:
        table.add_row(plain(d["disagreement_id"]), _disagreement_text(d), plain(said_by(d["filed"])),
                      plain(_disagreement_state(d)))
    return table


def _reviews(page: dict[str, Any]) -> Table:
    table = Table("review", "by", "verdict", "confidence", "revision", "state", title="Reviews", title_justify="left")
    for r in page["reviews"]:
        withdrawn = r["state"] == "withdrawn"
        state = _state(r["state"], withdrawn)
        if r.get("withdrawn"):
            state.append(f"\nWithdrawn by {said_by(r['withdrawn']['stamp'])}: {r['withdrawn']['reason']}", style="")
        verdict = Text(r["verdict"]).append(f": {r['summary']}" if r.get("summary") else "")
        by = f"{'a person' if r['reviewer_kind'] == 'person' else 'AI'}: {said_by(r['recorded'])}"
        table.add_row(plain(r["review_id"]), plain(by), verdict, r["confidence"], str(r["revision"]), state,
                      style=WITHDRAWN if withdrawn else "")
    return table


def _related(page: dict[str, Any]) -> Table:
    table = Table("related claim", "statement", "capability", "label", title="Related", title_justify="left")
    for r in page["related"]:
        label = Text(r.get("review_label") or "")
        if r.get("review_state_now"):
            label.append(f"{' · ' if label else ''}its page now: {r['review_state_now']}")
        if r.get("label_disagrees"):
            label.append(" (the label disagrees with its page)", style="yellow")
        table.add_row(plain(r["claim_id"]), plain(r["statement"]), plain(r.get("capability")), label)
    return table


def render_page(page: dict[str, Any]) -> Group:
    """A claim page for the terminal: what the HTML page shows, in the same words."""
    head = Text.assemble(
        (page["statement"], "bold"), "\n\n",
        f"capability: {page['capability']}", f"   technique: {page['technique']}" if page["technique"] else "", "\n",
        f"observed on: {page['observed_on']}\n",
        status_line(page["status"]), "\n",
        *(f"{line}\n" for line in _notes(page["notes"])),
        (f"drafted by {drafted_by(page['notes'])}, as of sequence {page['as_of_seq']} ({page['as_of_time']})", "dim"),
    )
    title = f"{page['claim_id']} · {page['slug']} · revision {page['revision']}"
    parts: list[Any] = [Panel(head, title=title, title_align="left")]
    tables = (_sources(page), _disagreements(page), _reviews(page), _related(page))
    parts += [table for table in tables if table.row_count]
    return Group(*parts)
