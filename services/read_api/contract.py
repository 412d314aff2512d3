"""The event contract next to the OpenAPI document: ``/asyncapi.json`` and a readable ``/asyncapi`` page."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse
from faststream.specification.asyncapi.site import get_asyncapi_html

from services.asyncapi import asyncapi_document, asyncapi_specification

router = APIRouter(tags=["contract"])


@router.get("/asyncapi.json", summary="AsyncAPI document of the claim subjects")
def asyncapi_json() -> JSONResponse:
    """What producers publish to NATS: one channel per event type, its payload schema and headers."""
    return JSONResponse(asyncapi_document())


@router.get("/asyncapi", response_class=HTMLResponse, include_in_schema=False)
def asyncapi_page() -> HTMLResponse:
    """The same document as a page (AsyncAPI's React component, like /docs for OpenAPI)."""
    return HTMLResponse(get_asyncapi_html(asyncapi_specification(), try_it_out_path=None))
