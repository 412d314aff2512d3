"""Request dependencies: the read-model engine of the app serving the request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Engine


def engine(request: Request) -> Engine:
    """The app's engine. A plain function, not a generator: FastAPI runs generator dependencies
    of sync routes in extra thread hops, which cost more than the query on a small machine."""
    return request.app.state.engine


DB = Annotated[Engine, Depends(engine)]
