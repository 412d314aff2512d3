"""``GET /claims/{id}/text``: the claim page in the registry's own text format, now or as of a past point."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse, Response

from services.ingest.export import registry_page
from services.ingest.page_format import render_page
from services.read_api import queries
from services.read_api.as_of import AsOfSeq, AsOfTime, as_of_point, claim_page_as_of
from services.read_api.consistency import visible_after
from services.read_api.deps import DB
from services.read_api.errors import ErrorBody, not_found
from services.read_api.reads import read

router = APIRouter(tags=["claims"], dependencies=[Depends(visible_after)])


# ``Response``, not ``PlainTextResponse``: the text is the 200's only; a refusal is JSON, as everywhere.
@router.get(
    "/claims/{claim_key}/text",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, 400: {"model": ErrorBody}, 404: {"model": ErrorBody}},
)
async def claim_text(
    claim_key: str, db: DB, request: Request, as_of_seq: AsOfSeq = None, as_of: AsOfTime = None
) -> PlainTextResponse:
    """The page as the registry publishes it (the format ``claimlog ingest`` reads), from the read models; with
    ``as_of_seq`` or ``as_of``, the page as it stood then, folded from the log as ``GET /claims/{id}`` does."""
    if (point := as_of_point(as_of_seq, as_of)) is not None:
        page = (await claim_page_as_of(request, db, claim_key, point)).body
    else:
        found = await read(db, queries.claim_page_json, claim_key)
        if found is None:
            raise not_found("claim", claim_key)
        page = found[0]
    return PlainTextResponse(render_page(registry_page(json.loads(page))))
