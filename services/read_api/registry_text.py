"""``GET /claims/{id}/text``: the claim page in the registry's own text format."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends
from fastapi.responses import PlainTextResponse

from services.ingest.export import registry_page
from services.ingest.page_format import render_page
from services.read_api import queries
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found

router = APIRouter(tags=["claims"], dependencies=[Depends(visible_after)])


@router.get("/claims/{claim_key}/text", response_class=PlainTextResponse, responses={404: {"model": ErrorBody}})
def claim_text(claim_key: str, db: DB) -> PlainTextResponse:
    """The page as the registry publishes it (the format ``claimlog ingest`` reads), from the read models."""
    with db.connect() as conn:
        found = queries.claim_page_json(conn, claim_key)
    if found is None:
        raise not_found("claim", claim_key)
    return PlainTextResponse(render_page(registry_page(json.loads(found[0]))))
