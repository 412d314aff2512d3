"""Log sequences in requests, bounded where the whole API declares them.

A number past the log's largest sequence names no event and, unbounded, reached the database driver as an
overflow (a 500). Every integer parameter of the API is declared with ``Seq`` (or a ``le=`` of its own),
so FastAPI answers 422 naming the parameter and its range before a route runs.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Ge, Le

from services.log import MAX_SEQ

MIN_INT64 = -(2**63)

Seq = Annotated[int, Ge(0), Le(MAX_SEQ)]
"""A log sequence: 0 (before the first event) to 2^63-1. Add ``Query(ge=1)`` where 0 means nothing."""


def fits_int64(value: int) -> bool:
    """Whether an integer the API did not declare (a sort key inside a cursor) fits a database's BIGINT."""
    return MIN_INT64 <= value <= MAX_SEQ
