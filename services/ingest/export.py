"""A claim page from the read models, back in the registry's text format (the round trip of ``claimlog ingest``)."""

from __future__ import annotations

from typing import Any

from services.ingest.page_format import PageRelated, PageSource, RegistryPage


def registry_page(page: dict[str, Any]) -> RegistryPage:
    """The registry page that says what a claim page (``GET /claims/{id}`` JSON) says.

    Withdrawn sources are left out (the registry's text shows the evidence that stands); related claims
    keep their rank order, with the capability and review label recorded with them.
    """
    sources = tuple(
        PageSource(s["relation"], s["measured"], s.get("breadth"), s.get("truncated", False), 0)
        for s in page["sources"]
        if s["state"] == "active"
    )
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
    )
