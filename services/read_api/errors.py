"""Error bodies the API answers with: a machine-readable code and a sentence for people."""

from __future__ import annotations

from fastapi import HTTPException
from pydantic import BaseModel


class ErrorBody(BaseModel):
    """What went wrong."""

    error: str
    message: str


def not_found(what: str, key: str) -> HTTPException:
    """A 404 naming what was looked for."""
    return HTTPException(status_code=404, detail={"error": f"{what}_not_found", "message": f"no {what} {key!r}"})


def bad_request(code: str, message: str) -> HTTPException:
    """A 400 with a reason."""
    return HTTPException(status_code=400, detail={"error": code, "message": message})
