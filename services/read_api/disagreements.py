"""``GET /claims/{id}/disagreements``: one claim's disagreements a page at a time, in the claim page's order.

The claim page (``GET /claims/{id}``) carries every disagreement, as frontends expect; a claim with hundreds
of them can be read here in pages instead. The order is the page's: the order they were filed in. A
disagreement, once filed, stays on its page in its place (nothing removes one; answers and outcomes change
it where it is), so the id of the last one read is a cursor that stays good: disagreements filed meanwhile
come after it, and a walk sees each one exactly once.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from pydantic import BaseModel, Field

from events.envelope import LOCAL_ID_PATTERN
from projections.page_model import DisagreementView
from services.read_api import queries
from services.read_api.as_of import AsOfSeq, AsOfTime, as_of_point, claim_page_as_of
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, InvalidRequestBody, not_found
from services.read_api.reads import read
from services.timeline.as_of import AsOf

router = APIRouter(tags=["claims"])
MAX_LIMIT = 200


class DisagreementList(BaseModel):
    """A page of one claim's disagreements, in the claim page's order; ask again with
    ``after_id=next_after_id`` (None at the end)."""

    claim_id: str
    as_of_seq: int = Field(description="The log sequence the claim's page stands at: its version, or the point asked for.")
    total: int = Field(description="The disagreements on the claim's page, open and resolved.")
    items: list[DisagreementView]
    next_after_id: str | None = Field(
        description="The `disagreement_id` of the last item, when more follow it: pass it back as `after_id`."
    )


REFUSALS = {
    404: {"model": ErrorBody, "description": "`claim_not_found`: no such claim (as of the point asked for)."},
    422: {
        "model": InvalidRequestBody,
        "description": "`invalid_request`: `limit` outside 1 to 200, or `after_id` not written as a disagreement id; "
        "`bad_cursor`: `after_id` names no disagreement on this claim's page (as of the point asked for); "
        "`beyond_log_head`: `after` or `Claimlog-After` past the head of the log. `problems` name the parameter.",
    },
}


@router.get(
    "/claims/{claim_key}/disagreements",
    response_model=DisagreementList,
    responses=REFUSALS,
    dependencies=[Depends(visible_after)],
)
async def get_disagreements(
    claim_key: str,
    db: DB,
    request: Request,
    after_id: Annotated[
        str | None,
        Query(pattern=LOCAL_ID_PATTERN, description="The `next_after_id` of the previous page: the items after that disagreement."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Disagreements per page.")] = 50,
    as_of_seq: AsOfSeq = None,
    as_of: AsOfTime = None,
) -> DisagreementList:
    """The claim's disagreements (by claim id or slug) a page at a time, in the order of the claim page's
    ``disagreements``, each as the page has it. With ``as_of_seq`` or ``as_of``: as the page stood then."""
    point = as_of_point(as_of_seq, as_of)
    if point is not None:
        doc = json.loads((await claim_page_as_of(request, db, claim_key, point)).body)
    elif (doc := await read(db, queries.claim_page_doc, claim_key)) is None:
        raise not_found("claim", claim_key)
    disagreements = doc["disagreements"]
    start = 0 if after_id is None else _after(disagreements, after_id, claim_id=doc["claim_id"], point=point)
    items = disagreements[start:start + limit]
    more = start + limit < len(disagreements)
    return DisagreementList(
        claim_id=doc["claim_id"], as_of_seq=doc["as_of_seq"], total=len(disagreements), items=items,
        next_after_id=items[-1]["disagreement_id"] if more else None,
    )


def _after(disagreements: list[dict], after_id: str, *, claim_id: str, point: AsOf | None) -> int:
    """Where the page after ``after_id`` starts; 422 ``bad_cursor`` naming ``after_id`` when it is not on the page."""
    for at, disagreement in enumerate(disagreements):
        if disagreement["disagreement_id"] == after_id:
            return at + 1
    when = f" as of {point}" if point is not None else ""
    problem = (
        f"no disagreement {after_id!r} on the page of {claim_id}{when}: pass the next_after_id of a page of "
        "this claim, or leave after_id out to start at the first"
    )
    detail = {"error": "bad_cursor", "message": problem, "problems": [{"where": "query.after_id", "problem": problem}]}
    raise HTTPException(422, detail=detail)
