"""The event contract next to the OpenAPI document: ``/asyncapi.json`` and a readable ``/asyncapi`` page."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from faststream.specification.asyncapi.site import get_asyncapi_html

from services.asyncapi import asyncapi_document, asyncapi_specification
from services.read_api.browser import with_policy

router = APIRouter(tags=["contract"])
# AsyncAPI's React component (Apache-2.0) as its npm package @asyncapi/react-component 3.1.5 ships it
# (browser/standalone/index.js, styles/default.min.css), served from the API's own static files: no Python
# package ships it, and the page loads nothing from elsewhere (the icons FastStream's page names on
# asyncapi.com are left out).
ASYNCAPI_ASSETS = "/static/asyncapi"
ASYNCAPI_VERSION = "3.1.5"
ASYNCAPI_POLICY = {
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
}
_REMOTE_ICON = re.compile(r'\s*<link rel="icon"[^>]*href="https://[^"]*">')


@router.get("/asyncapi.json", summary="AsyncAPI document of the claim subjects")
def asyncapi_json() -> JSONResponse:
    """What producers publish to NATS: one channel per event type, its payload schema and headers."""
    return JSONResponse(asyncapi_document())


@router.get("/asyncapi", response_class=HTMLResponse, include_in_schema=False)
def asyncapi_page(request: Request) -> HTMLResponse:
    """The same document as a page (AsyncAPI's React component, like /docs for OpenAPI)."""
    assets = f"{request.scope.get('root_path', '').rstrip('/')}{ASYNCAPI_ASSETS}/asyncapi-react-{ASYNCAPI_VERSION}"
    page = get_asyncapi_html(
        asyncapi_specification(), try_it_out_path=None, asyncapi_js_url=f"{assets}.js", asyncapi_css_url=f"{assets}.css"
    )
    return with_policy(HTMLResponse(_REMOTE_ICON.sub("", page)), ASYNCAPI_POLICY)
