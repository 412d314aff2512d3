"""Pages for people: the claim page and the listing as server-rendered HTML, readable without JavaScript.

The same read models and queries as the JSON routes; only the shape of the answer differs.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, StrictUndefined

from events import Actor
from services.ingest.page_format import INVITATION, RELATION_WORDS, UNREVIEWED_NOTE
from services.read_api import queries
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.routes import _decode_cursor, _encode_cursor

router = APIRouter(include_in_schema=False)
DEFAULT_LIMIT = 50
Capability = Annotated[str | None, Query(max_length=500)]


def _environment() -> Environment:
    """Templates from the package (so an installed wheel has them), every value HTML-escaped."""
    environment = Environment(
        loader=PackageLoader("services.read_api", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = _when
    environment.filters["who"] = _who
    environment.globals.update(
        INVITATION=INVITATION,
        UNREVIEWED_NOTE=UNREVIEWED_NOTE,
        RELATION_LABELS={relation: f"{word} by" for word, relation in RELATION_WORDS.items()},
    )
    return environment


def _when(moment: datetime) -> str:
    """A time as people read it, to the minute, in UTC."""
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _who(actor: Actor) -> str:
    """An actor as the page names it: id, then what kind of actor (and which model)."""
    if actor.kind == "model":
        return f"{actor.id} (model{': ' + actor.model if actor.model else ''})"
    return f"{actor.id} ({actor.kind})"


TEMPLATES = _environment()


def _html(template: str, status_code: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(template).render(**context), status_code=status_code)


@router.get("/")
def home() -> RedirectResponse:
    """The registry's front page is the claim listing."""
    return RedirectResponse("/pages/claims", status_code=307)


@router.get("/pages/claims", response_class=HTMLResponse)
def claim_listing(
    db: DB,
    capability: Capability = None,
    cursor: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = DEFAULT_LIMIT,
) -> HTMLResponse:
    """Claims in id order, a page at a time, optionally of one capability."""
    capability = capability or None
    try:
        after = _decode_cursor(cursor) if cursor else None
    except HTTPException as error:
        return _html("error.html", error.status_code, title="Not a page of this listing", message=error.detail["message"])
    with db.connect() as conn:
        rows = queries.claim_summaries(conn, after=after, limit=limit + 1, capability=capability)
    next_url = _next_page(rows[limit - 1]["claim_id"], capability, limit) if len(rows) > limit else None
    return _html("listing.html", claims=rows[:limit], capability=capability, next_url=next_url, first=cursor is None)


def _next_page(last_shown: str, capability: str | None, limit: int) -> str:
    """The listing's next page: the same filter, after the last claim shown."""
    wanted = {"capability": capability, "cursor": _encode_cursor(last_shown)}
    wanted["limit"] = limit if limit != DEFAULT_LIMIT else None
    return "/pages/claims?" + urlencode({name: value for name, value in wanted.items() if value is not None})


@router.get("/pages/claims/{claim_key}", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
def claim_page(claim_key: str, db: DB, request: Request) -> HTMLResponse:
    """A claim's page, by claim id or slug, as the registry lays it out."""
    with db.connect() as conn:
        page = queries.claim_page(conn, claim_key)
    if page is None:
        return _html("error.html", 404, title="No such claim", message=f"There is no claim {claim_key!r} in the registry.")
    return _html("claim.html", page=page, base_url=str(request.base_url))
