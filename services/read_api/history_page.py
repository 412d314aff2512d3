"""``/pages/claims/{id}/history``: a claim's history for people, every event with who acted and what it changed,
each linking to the page as it stood right after it. The data of ``GET /claims/{id}/history``."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse

from services.log import LogError
from services.read_api.as_of import claim_events, claim_id_of, connected_log
from services.read_api.deps import DB
from services.read_api.pages import html_page
from services.timeline.history import claim_history

router = APIRouter(include_in_schema=False)


@router.get("/pages/claims/{claim_key}/history", response_class=HTMLResponse)
async def history_page(claim_key: str, db: DB, request: Request) -> HTMLResponse:
    """Every event of the claim (by id or slug) in log order, as a table, with the diffs of drafts, revisions
    and source corrections."""
    try:
        claim_id = claim_id_of(db, claim_key)
        stored = await claim_events(request).read(connected_log(request), claim_id)
    except HTTPException as error:
        return html_page("error.html", error.status_code, title="No history", message=error.detail["message"])
    except LogError as error:
        return html_page("error.html", 503, title="Not available", message=str(error))
    entries = claim_history(claim_id, stored)
    if entries is None:
        return html_page("error.html", 404, title="No such claim",
                         message=f"There is no claim {claim_key!r} in the registry.")
    return html_page("history.html", claim_id=claim_id, entries=entries,
                     page_url=f"/pages/claims/{quote(claim_id, safe='')}",
                     json_url=f"/claims/{quote(claim_id, safe='')}/history")
