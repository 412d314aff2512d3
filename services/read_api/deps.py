"""Request dependencies: a database connection per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import Connection


def connection(request: Request) -> Iterator[Connection]:
    """A read-only use of the read-model database for one request."""
    with request.app.state.engine.connect() as conn:
        yield conn


Conn = Annotated[Connection, Depends(connection)]
