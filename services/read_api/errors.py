"""Error bodies the API answers with: a machine-readable code and a sentence for people."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    """What went wrong."""

    error: str
    message: str


class Problem(BaseModel):
    """One thing wrong with a request, and where it is (``body.field``, ``query.limit``, ``header.if-match``)."""

    where: str
    problem: str


class InvalidRequestBody(ErrorBody):
    """A request the API refused as it reads it: ``invalid_request`` lists every problem, each with where it is."""

    problems: list[Problem] = Field(default_factory=list, description="With `invalid_request`: each problem found.")


# What any read may be answered besides its own outcomes (the app adds them to every read route).
READ_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "`bad_character`: a NUL (%00) in the path or a query parameter; or the route's own reason "
        "(`bad_as_of`, `bad_cursor`, `bad_query`, `bad_sort`, `bad_type`: the message says what is wrong)."},
    422: {
        "model": InvalidRequestBody,
        "description": "`invalid_request`: a parameter of the wrong type or out of its range (`problems` say which); "
        "`beyond_log_head`: `after` or `Claimlog-After` past the head of the log (the message names the head).",
    },
    503: {
        "model": ErrorBody,
        "description": "`not_yet_visible`: the projections have not applied `after` within the wait (retry); "
        "`database_unavailable` or `log_unavailable` (retry).",
        "headers": {"Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}},
    },
}
# Routes that take no parameters (health, metrics, the documents): a refusal, when there is one, has the error shape.
ANY_REFUSAL: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "A request the API refuses (an unknown method, a body it will not read)."},
}


def not_found(what: str, key: str) -> HTTPException:
    """A 404 naming what was looked for."""
    return HTTPException(status_code=404, detail={"error": f"{what}_not_found", "message": f"no {what} {key!r}"})


def bad_request(code: str, message: str) -> HTTPException:
    """A 400 with a reason."""
    return HTTPException(status_code=400, detail={"error": code, "message": message})
