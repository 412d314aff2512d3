"""The API's documentation pages, ``/docs`` (Swagger UI) and ``/redoc``, and the files the pages load.

FastAPI's own pages load Swagger UI and ReDoc from a CDN; these load the copies the ``fastapi-offline``
package ships, from the API itself, so the docs work without the internet. The registry's stylesheet
is served next to them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from services.read_api.browser import with_policy

router = APIRouter(include_in_schema=False)
STATIC = "/static"
DOCS_ASSETS = f"{STATIC}/docs"
# Swagger UI styles its widgets through the CSSOM, which a policy does not govern, and shows data: icons.
SWAGGER_POLICY = {"script-src": "'self'", "style-src": "'self'", "img-src": "'self' data:"}
# ReDoc's styles are made at run time (styled-components) and its search runs in a worker made from a blob;
# the logo in its side bar comes from its CDN and stays out.
REDOC_POLICY = {
    "script-src": "'self'",
    "style-src": "'self' 'unsafe-inline'",
    "img-src": "'self' data:",
    "worker-src": "'self' blob:",
}


def install_docs(app: FastAPI) -> None:
    """The docs pages, their files under ``/static/docs``, and the registry's stylesheet under ``/static``."""
    app.include_router(router)
    app.mount(DOCS_ASSETS, StaticFiles(directory=Path(str(files("fastapi_offline") / "static"))), name="docs-assets")
    app.mount(STATIC, StaticFiles(directory=Path(str(files("services.read_api") / "static"))), name="static")


def _root(request: Request) -> str:
    """The path the API is served under (behind a proxy that strips a prefix), as FastAPI's own pages find it."""
    return request.scope.get("root_path", "").rstrip("/")


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI over the OpenAPI document."""
    root, app = _root(request), request.app
    page = get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - Swagger UI",
        swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        oauth2_redirect_url=None,
        swagger_ui_parameters=app.swagger_ui_parameters,
    )
    return with_policy(page, SWAGGER_POLICY)


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc over the OpenAPI document."""
    root, app = _root(request), request.app
    page = get_redoc_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} - ReDoc",
        redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
        with_google_fonts=False,
    )
    return with_policy(page, REDOC_POLICY)
