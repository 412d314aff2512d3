"""Request dependencies: the read-model engine of the app serving the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine

from services.read_api.errors import bad_request


def engine(request: Request) -> Engine:
    """The app's engine. A plain function, not a generator: FastAPI runs generator dependencies
    of sync routes in extra thread hops, which cost more than the query on a small machine."""
    refuse_nul(request)
    return request.app.state.engine


def refuse_nul(request: Request) -> None:
    """400 for a NUL character in the path or a query parameter: PostgreSQL cannot hold one in text."""
    if "\x00" in request.scope["path"] or any("\x00" in value for value in request.query_params.values()):
        raise bad_request("bad_character", "a NUL character (%00) is not allowed in the path or a query parameter")


DB = Annotated[Engine, Depends(engine)]
