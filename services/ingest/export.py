"""A claim page from the read models, back in the registry's text format (the round trip of ``claimlog ingest``)."""

from __future__ import annotations

from typing import Any

from events import Actor
from services.ingest.page_format import PageRelated, PageSource, RegistryPage
from services.ingest.page_sections import PageDisagreement, PagePart, PageReview


def registry_page(page: dict[str, Any]) -> RegistryPage:
    """The registry page that says what a claim page (``GET /claims/{id}`` JSON) says.

    Withdrawn sources are left out (the registry's text shows the evidence that stands), so a disagreement
    about one names no source; related claims keep their rank order, with the capability and review label
    recorded with them. Sources, disagreements and reviews name who brought or wrote each part: for one
    imported from a page, whom that page named, and no one for a source from a page that named no one.
    """
    active = [s for s in page["sources"] if s["state"] == "active"]
    sources = tuple(PageSource(s["relation"], s["measured"], s.get("breadth"), s.get("truncated", False), 0, _brought(s))
                    for s in active)
    numbers = {s["source_id"]: number for number, s in enumerate(active, start=1)}
    related = tuple(
        PageRelated(r["statement"] or r["claim_id"] or r["key"], r.get("capability") or "", r.get("review_label"), 0)
        for r in page["related"]
    )
    notes = page["notes"]
    return RegistryPage(
        path=f"{page['claim_id']}.txt",
        claim_id=page["claim_id"],
        slug=page["slug"],
        statement=page["statement"],
        capability=page["capability"],
        observed_on=page["observed_on"],
        sources=sources,
        related=related,
        drafted_confidence=notes.get("drafted_confidence"),
        falsifier=notes.get("falsifier_as_drafted"),
        reviewed=not page["status"]["unreviewed_model_draft"],
        disagreements=tuple(_disagreement(d, numbers) for d in page["disagreements"]),
        reviews=tuple(_review(r) for r in page["reviews"]),
    )


def _brought(source: dict[str, Any]) -> Actor | None:
    stamp = source["brought"]
    if stamp.get("written_by"):
        return Actor.model_validate(stamp["written_by"])
    return None if source.get("imported_from") else Actor.model_validate(stamp["by"])


def _part(stamp: dict[str, Any], text: str | None) -> PagePart:
    return PagePart(Actor.model_validate(stamp.get("written_by") or stamp["by"]), text)


def _disagreement(d: dict[str, Any], numbers: dict[str, int]) -> PageDisagreement:
    resolved = _part(d["resolved"], d.get("resolution_note")) if d.get("resolved") else None
    answers = tuple(_part(a["stamp"], a["answer"]) for a in d["answers"])
    return PageDisagreement(_part(d["filed"], d["argument"]), numbers.get(d.get("source_id") or ""), d.get("evidence"),
                            answers, d.get("outcome"), resolved, 0)


def _review(r: dict[str, Any]) -> PageReview:
    withdrawn = _part(r["withdrawn"]["stamp"], r["withdrawn"]["reason"]) if r.get("withdrawn") else None
    return PageReview(_part(r["recorded"], r.get("summary")), r["verdict"], r["confidence"], r["revision"], withdrawn, 0)
