"""The read API's application factory: one engine per app, passed in or built from settings."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine

from services.read_api.routes import router


def create_app(engine: Engine) -> FastAPI:
    """The read API over the read models behind ``engine``."""
    app = FastAPI(
        title="claimlog read API",
        version="0.1.0",
        description="Claim pages, listings and health, folded from the claim log.",
    )
    app.state.engine = engine
    app.include_router(router)
    app.add_exception_handler(HTTPException, _error_body)
    return app


async def _error_body(request: Request, error: HTTPException) -> JSONResponse:
    """Answer errors with {error, message} rather than FastAPI's {detail}."""
    body = error.detail if isinstance(error.detail, dict) else {"error": "http_error", "message": str(error.detail)}
    return JSONResponse(body, status_code=error.status_code, headers=getattr(error, "headers", None))
