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


def decimal_at_most(limit: int) -> str:
    """A regular expression of the decimal numbers from 0 to ``limit`` (leading zeros allowed)."""
    digits = str(limit)
    branches = [f"[0-9]{{1,{len(digits) - 1}}}"] if len(digits) > 1 else []
    for at, digit in enumerate(digits):
        if digit != "0":
            rest = len(digits) - at - 1
            branches.append(f"{digits[:at]}[0-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    return "(?:" + "|".join([*branches, digits]) + ")"


# A log sequence written as text, as ``as_of_seq`` takes it (``services/timeline/as_of.py``): digits, spaces
# around them, and ``-0`` for 0. Published so a generated client checks it before sending.
SEQ_TEXT_PATTERN = rf"^\s*(?:-?0+|0*{decimal_at_most(MAX_SEQ)})\s*$"
# A log sequence as the header and query parameters declare it: never null (absent means none).
SEQ_SCHEMA = {"type": "integer", "minimum": 0, "maximum": MAX_SEQ}


def fits_int64(value: int) -> bool:
    """Whether an integer the API did not declare (a sort key inside a cursor) fits a database's BIGINT."""
    return MIN_INT64 <= value <= MAX_SEQ
