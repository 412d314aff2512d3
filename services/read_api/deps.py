"""Request dependencies: the services a route takes, as typed aliases over the app's ``ApiState``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from services.read_api.api_state import Api
from services.read_api.errors import bad_request


async def engine(request: Request, api: Api) -> Engine:
    """The engine of the active read-model generation (a request takes it once, so it reads one generation)."""
    refuse_nul(request)
    return api.reads.engine


def refuse_nul(request: Request) -> None:
    """400 for a NUL character in the path or a query parameter: PostgreSQL cannot hold one in text."""
    if "\x00" in request.scope["path"] or any("\x00" in value for value in request.query_params.values()):
        raise bad_request("bad_character", "a NUL character (%00) is not allowed in the path or a query parameter")


DB = Annotated[Engine, Depends(engine)]
