"""The event contract next to the OpenAPI document: ``/asyncapi.json`` and a readable ``/asyncapi`` page."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse
from faststream.specification.asyncapi.site import get_asyncapi_html

from services.asyncapi import asyncapi_document, asyncapi_specification
from services.read_api.browser import with_policy

router = APIRouter(tags=["contract"])
# The component comes from its CDN (no Python package ships it), its icons from asyncapi.com.
ASYNCAPI_POLICY = {
    "script-src": "'self' https://unpkg.com",
    "style-src": "'self' https://unpkg.com",
    "img-src": "'self' data: https://www.asyncapi.com",
}


@router.get("/asyncapi.json", summary="AsyncAPI document of the claim subjects")
def asyncapi_json() -> JSONResponse:
    """What producers publish to NATS: one channel per event type, its payload schema and headers."""
    return JSONResponse(asyncapi_document())


@router.get("/asyncapi", response_class=HTMLResponse, include_in_schema=False)
def asyncapi_page() -> HTMLResponse:
    """The same document as a page (AsyncAPI's React component, like /docs for OpenAPI)."""
    return with_policy(HTMLResponse(get_asyncapi_html(asyncapi_specification(), try_it_out_path=None)), ASYNCAPI_POLICY)
