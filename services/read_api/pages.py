"""Pages for people: the claim page, the listing and search, and the scorecard as server-rendered HTML,
readable without JavaScript.

The same read models and queries as the JSON routes; only the shape of the answer differs.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import ValidationError

from events import Actor
from services.ingest.page_format import INVITATION, RELATION_WORDS, UNREVIEWED_NOTE, caveats
from services.read_api import listing_sql, queries
from services.read_api.aggregates import read_scorecard
from services.read_api.chart import scorecard_chart
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.listing import ListingQuery, read_listing

router = APIRouter(include_in_schema=False)
FORM_FIELDS = ("q", "capability", "lifecycle", "include_closed", "open_disagreement", "sort", "cursor")
SORTS = {
    "": "best match with words, else claim id",
    "id": "claim id",
    "recent": "last changed first",
    "contested": "most contested first",
    "evidence": "most sources first",
    "relevance": "best match first",
}


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
    environment.filters["caveats"] = caveats
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


@router.get("/pages/claims", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
def claim_listing(db: DB, request: Request) -> HTMLResponse:
    """The listing and search as a page, with the query, filters and cursors of ``GET /claims``, asked for
    by a plain GET form; a query that cannot be answered gets the form back with why, and a 400."""
    asked = _asked(request)
    try:
        query = ListingQuery.model_validate(asked)
        with db.connect() as conn:
            listing = read_listing(conn, query)
            total = listing_sql.claim_count(conn, query.filters())
    except ValidationError as error:
        return _listing_page(asked, 400, problem=_problems(error))
    except HTTPException as error:
        return _listing_page(asked, error.status_code, problem=error.detail["message"])
    wanted = {name: value for name, value in asked.items() if name != "cursor"}
    next_url = _listing_url(**wanted, cursor=listing.next_cursor) if listing.next_cursor else None
    return _listing_page(asked, claims=listing.rows, total=total, next_url=next_url)


def _asked(request: Request) -> dict[str, str | list[str]]:
    """What the listing is asked for: its parameters that the form did not send empty (an empty field filters
    nothing); ``after`` and anything else are not the listing's."""
    params = request.query_params
    asked: dict[str, str | list[str]] = {
        name: value for name, value in params.items() if name in ListingQuery.model_fields and value.strip()
    }
    asked.pop("lifecycle", None)
    if lifecycles := [value for value in params.getlist("lifecycle") if value.strip()]:
        asked["lifecycle"] = lifecycles
    return asked


def _problems(error: ValidationError) -> str:
    """A validation error as a sentence: each field given that is wrong, and what is wrong with it."""
    return "; ".join(f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}" for problem in error.errors()[:5])


def _listing_page(asked: dict, status_code: int = 200, **context) -> HTMLResponse:
    """The listing page around its form, filled in as asked (the fields the form has no input for ride along hidden)."""
    hidden = {name: value for name, value in asked.items() if name not in FORM_FIELDS and isinstance(value, str)}
    first_url = _listing_url(**{name: value for name, value in asked.items() if name != "cursor"})
    context = {"claims": [], "total": None, "next_url": None, "problem": None, **context}
    return _html(
        "listing.html", status_code, form=asked, hidden=hidden, capability=asked.get("capability"),
        first_url=first_url if "cursor" in asked else None, SORTS=SORTS, **context,
    )


def _listing_url(**wanted: str | list[str]) -> str:
    """The listing page asked for with these parameters."""
    return "/pages/claims" + ("?" + urlencode(wanted, doseq=True) if wanted else "")


@router.get("/pages/scorecard", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
def scorecard_page(db: DB) -> HTMLResponse:
    """Every capability's scorecard as a chart, with its numbers in a table: the data of ``GET /scorecard``."""
    card = read_scorecard(db, None)
    rows = [(score.capability, _listing_url(capability=score.capability), score) for score in card.capabilities]
    return _html("scorecard.html", card=card, rows=rows, chart=scorecard_chart(rows), capability=None)


@router.get("/pages/scorecard/{capability}", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
def capability_scorecard_page(capability: str, db: DB) -> HTMLResponse:
    """One capability's scorecard, and its techniques', as a chart and a table."""
    card = read_scorecard(db, capability)
    if not card.capabilities:
        message = f"No active claim has the capability {capability!r}."
        return _html("error.html", 404, title="No such capability", message=message)
    [score] = card.capabilities
    rows = [(capability, _listing_url(capability=capability), score)] + [
        (each.technique, _listing_url(capability=capability, technique=each.technique), each) for each in score.techniques
    ]
    return _html("scorecard.html", card=card, rows=rows, chart=scorecard_chart(rows), capability=capability)


@router.get("/pages/claims/{claim_key}", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
def claim_page(claim_key: str, db: DB, request: Request) -> HTMLResponse:
    """A claim's page, by claim id or slug, as the registry lays it out."""
    with db.connect() as conn:
        page = queries.claim_page(conn, claim_key)
    if page is None:
        return _html("error.html", 404, title="No such claim", message=f"There is no claim {claim_key!r} in the registry.")
    return _html("claim.html", page=page, base_url=str(request.base_url))
