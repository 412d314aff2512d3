"""Request dependencies: the read-model engine of the app serving the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from services.read_api.errors import bad_request


async def engine(request: Request) -> Engine:
    """The app's engine. A coroutine, though it never waits: FastAPI runs a plain function dependency
    in its thread pool, and that hop costs more than the claim page's query."""
    refuse_nul(request)
    return request.app.state.engine


def refuse_nul(request: Request) -> None:
    """400 for a NUL character in the path or a query parameter: PostgreSQL cannot hold one in text."""
    if "\x00" in request.scope["path"] or any("\x00" in value for value in request.query_params.values()):
        raise bad_request("bad_character", "a NUL character (%00) is not allowed in the path or a query parameter")


DB = Annotated[Engine, Depends(engine)]
