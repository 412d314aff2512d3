"""Pages for people: the claim page, the listing and search, and the scorecard as server-rendered HTML,
readable without JavaScript.

The same read models and queries as the JSON routes; only the shape of the answer differs.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from events import Actor
from events.envelope import actor_label
from events.imported import page_drafter_label
from projections.page_model import PAGE, ClaimPage
from services.ingest.page_format import INVITATION, RELATION_WORDS, UNREVIEWED_NOTE, caveats
from services.read_api import listing_sql, queries
from services.read_api.aggregates import scorecard_at
from services.read_api.as_of import AsOfSeq, AsOfTime, claim_page_as_of, listing_as_of
from services.read_api.chart import scorecard_chart
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.listing import Listing, ListingQuery, read_listing
from services.read_api.page_folds import disagreement_sections
from services.timeline.as_of import AsOf, BadAsOf, parse_as_of

router = APIRouter(include_in_schema=False)
AS_OF_PARAMS = ("as_of_seq", "as_of")  # the point of the log a page shows, in the order parse_as_of takes them
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
    environment.filters["when_exactly"] = _when_exactly
    environment.filters["who"] = _who
    environment.filters["drafter"] = lambda drafter: page_drafter_label(drafter.kind, drafter.model)
    environment.filters["caveats"] = caveats
    # One path segment: "/" encoded too (Jinja's urlencode keeps it, so "a/../b" would climb the path).
    environment.filters["segment"] = lambda value: quote(str(value), safe="")
    environment.globals.update(
        INVITATION=INVITATION,
        UNREVIEWED_NOTE=UNREVIEWED_NOTE,
        RELATION_LABELS={relation: f"{word} by" for word, relation in RELATION_WORDS.items()},
    )
    return environment


def _when(moment: datetime) -> str:
    """A time as people read it, to the minute, in UTC."""
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _when_exactly(moment: datetime) -> str:
    """A time to the second, in UTC: for a point of the log, where two events a minute apart differ."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _who(actor: Actor) -> str:
    return actor_label(actor.id, actor.kind, actor.model)


TEMPLATES = _environment()


def html_page(template: str, status_code: int = 200, **context) -> HTMLResponse:
    """One of the registry's templates rendered as a page."""
    return HTMLResponse(TEMPLATES.get_template(template).render(**context), status_code=status_code)


_html = html_page


@router.get("/")
def home() -> RedirectResponse:
    """The registry's front page is the claim listing."""
    return RedirectResponse("/pages/claims", status_code=307)


@router.get("/favicon.ico")
def favicon() -> RedirectResponse:
    """The registry's icon, for browsers that ask for it where pages do not say (the pages link it)."""
    return RedirectResponse("/static/favicon.svg", status_code=308)


@router.get("/pages/claims", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
async def claim_listing(db: DB, request: Request) -> HTMLResponse:
    """The listing and search as a page, with the query, filters and cursors of ``GET /claims``, asked for
    by a plain GET form; a query that cannot be answered gets the form back with why, and a 400. With
    ``as_of_seq`` or ``as_of``, as it stood then, under the banner of a past point."""
    asked = _asked(request)
    point_asked = {name: asked.pop(name) for name in AS_OF_PARAMS if name in asked}
    try:
        point = _as_of(*(point_asked.get(name) for name in AS_OF_PARAMS))
    except _AsOfError as error:
        return error.response
    at = {"as_of": _as_of_label(point), "present_url": _listing_url(**asked), "history_url": None,
          "at": "?" + urlencode(point_asked) if point else ""}
    asked |= point_asked
    try:
        query = ListingQuery.model_validate({k: v for k, v in asked.items() if k not in AS_OF_PARAMS})
        if point is not None:
            _, listing, total = await listing_as_of(request, query, point)
        else:
            listing, total = await run_in_threadpool(_listing_now, db, query)
    except ValidationError as error:
        return _listing_page(asked, 400, problem=_problems(error), **at)
    except HTTPException as error:
        return _listing_page(asked, error.status_code, problem=error.detail["message"], **at)
    wanted = {name: value for name, value in asked.items() if name != "cursor"}
    next_url = _listing_url(**wanted, cursor=listing.next_cursor) if listing.next_cursor else None
    # A listing of now hears the whole registry's stream, whatever its filters: any change may move a claim into
    # or out of them. One as of a point of the log never changes.
    live_url = None if point else "/live"
    return _listing_page(asked, claims=listing.rows, total=total, next_url=next_url, live_url=live_url, **at)


def _listing_now(db: DB, query: ListingQuery) -> tuple[Listing, int]:
    with db.connect() as conn:
        return read_listing(conn, query), listing_sql.claim_count(conn, query.filters())


def _asked(request: Request) -> dict[str, str | list[str]]:
    """What the listing is asked for: its parameters that the form did not send empty (an empty field filters
    nothing), and the point of the log; ``after`` and anything else are not the listing's."""
    params = request.query_params
    asked: dict[str, str | list[str]] = {
        name: value for name, value in params.items()
        if (name in ListingQuery.model_fields or name in AS_OF_PARAMS) and value.strip()
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
    context = {"claims": [], "total": None, "next_url": None, "problem": None, "as_of": None, "at": "", **context}
    return _html(
        "listing.html", status_code, form=asked, hidden=hidden, capability=asked.get("capability"),
        first_url=first_url if "cursor" in asked else None, SORTS=SORTS, **context,
    )


def _listing_url(**wanted: str | list[str]) -> str:
    """The listing page asked for with these parameters."""
    return "/pages/claims" + ("?" + urlencode(wanted, doseq=True) if wanted else "")


class _AsOfError(Exception):
    """An as-of read that cannot be answered, carrying the page to answer instead."""

    def __init__(self, response: HTMLResponse):
        self.response = response


def _as_of(as_of_seq: str | None, as_of: str | None) -> AsOf | None:
    """The point of the log a page is asked for (None for now); a bad one is a 400 page saying why."""
    try:
        return parse_as_of(as_of_seq, as_of)
    except BadAsOf as error:
        raise _AsOfError(_html("error.html", 400, title="No such point of the log", message=str(error))) from None


def _as_of_label(point: AsOf | None) -> str | None:
    """A point of the log as the banner names it; None for now."""
    if point is None:
        return None
    return f"log sequence {point.seq}" if point.seq is not None else _when_exactly(point.at) if point.at else "now"


def _unavailable(error: HTTPException) -> HTMLResponse:
    return _html("error.html", error.status_code, title="Not available", message=error.detail["message"])


async def _scorecard_page(request: Request, db: DB, capability: str | None, point: AsOf | None) -> HTMLResponse:
    try:
        card = await scorecard_at(request, db, capability, point)
    except HTTPException as error:
        return _unavailable(error)
    if capability is None:
        rows = [(score.capability, _listing_url(capability=score.capability), score) for score in card.capabilities]
    elif not card.capabilities:
        when = f" as of {_as_of_label(point)}" if point else ""
        return _html("error.html", 404, title="No such capability",
                     message=f"No active claim has the capability {capability!r}{when}.")
    else:
        [score] = card.capabilities
        rows = [(capability, _listing_url(capability=capability), score)] + [
            (each.technique, _listing_url(capability=capability, technique=each.technique), each)
            for each in score.techniques
        ]
    present = "/pages/scorecard" + (f"/{quote(capability, safe='')}" if capability else "")
    live = None if point else "/live" + (f"?{urlencode({'capability': capability})}" if capability else "")
    return _html("scorecard.html", card=card, rows=rows, chart=scorecard_chart(rows), capability=capability,
                 as_of=_as_of_label(point), present_url=present, history_url=None, live_url=live)


@router.get("/pages/scorecard", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
async def scorecard_page(request: Request, db: DB, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None) -> HTMLResponse:
    """Every capability's scorecard as a chart, with its numbers in a table: the data of ``GET /scorecard``;
    with ``as_of_seq`` or ``as_of``, as it stood then."""
    try:
        point = _as_of(as_of_seq, as_of)
    except _AsOfError as error:
        return error.response
    return await _scorecard_page(request, db, None, point)


@router.get("/pages/scorecard/{capability}", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
async def capability_scorecard_page(
    capability: str, request: Request, db: DB, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> HTMLResponse:
    """One capability's scorecard, and its techniques', as a chart and a table; as of a point on request."""
    try:
        point = _as_of(as_of_seq, as_of)
    except _AsOfError as error:
        return error.response
    return await _scorecard_page(request, db, capability, point)


@router.get("/pages/claims/{claim_key}", response_class=HTMLResponse, dependencies=[Depends(visible_after)])
async def claim_page(
    claim_key: str, db: DB, request: Request, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> HTMLResponse:
    """A claim's page, by claim id or slug, as the registry lays it out; with ``as_of_seq`` or ``as_of``, as
    it stood then (folded from the log, as ``GET /claims/{id}`` does), under a banner saying so."""
    try:
        point = _as_of(as_of_seq, as_of)
        page = await _claim_page(request, db, claim_key, point)
    except _AsOfError as error:
        return error.response
    if page is None:
        when = f" as of {_as_of_label(point)}" if point else ""
        return _html("error.html", 404, title="No such claim",
                     message=f"There is no claim {claim_key!r} in the registry{when}.")
    claim = quote(page.claim_id, safe="")
    return _html("claim.html", page=page, disagreements=disagreement_sections(page.disagreements),
                 base_url=str(request.base_url), as_of=_as_of_label(point),
                 present_url=f"/pages/claims/{claim}", history_url=f"/pages/claims/{claim}/history",
                 live_url=None if point else f"/claims/{claim}/live")


async def _claim_page(request: Request, db: DB, claim_key: str, point: AsOf | None) -> ClaimPage | None:
    """The page now, from the read model, or as of ``point``, folded from the log; None if there is none."""
    try:
        if point is None:
            return await run_in_threadpool(_live_page, db, claim_key)
        return PAGE.validate_json((await claim_page_as_of(request, db, claim_key, point)).body)
    except HTTPException as error:
        if error.status_code == 404:
            return None
        raise _AsOfError(_unavailable(error)) from None


def _live_page(db: DB, claim_key: str) -> ClaimPage | None:
    with db.connect() as conn:
        return queries.claim_page(conn, claim_key)
