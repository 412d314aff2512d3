"""Links between claims. A related claim may not have a page yet: its statement is recorded."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator

from events.envelope import ClaimId, Event, ShortText, Text


@lru_cache(maxsize=1 << 15)
def statement_key(statement: str) -> str:
    """A stable key for a statement, so related claims resolve to pages by what they say.

    Cached: the projector asks for it at every event of a claim, and a statement rarely changes. The
    cache holds more statements than the live projector keeps pages (20,000), and no more: a rebuild
    writes each page about once, and its memory must not grow with the number of claims."""
    normal = " ".join(statement.split()).casefold()  # str.split's whitespace is the regex \s: the same key
    return "stmt-" + hashlib.sha256(normal.encode()).hexdigest()[:24]


class ClaimsRelated(Event):
    """The claim was related to another claim, known by id or by its statement."""

    type: Literal["ClaimsRelated"] = "ClaimsRelated"
    schema_version: int = Field(default=2, ge=1)  # 2: imported_from
    related_claim_id: ClaimId | None = None
    statement: Text | None = Field(default=None, description="The related claim's statement, as the source lists it.")
    capability: ShortText | None = None
    review_label: ShortText | None = Field(default=None, description='As shown, e.g. "reviewed by AI".')
    rank: int | None = Field(default=None, ge=1, description="Position among related claims, 1 first.")
    imported_from: ShortText | None = Field(
        default=None,
        description="The page this was copied from, which does not say who brought it; the event's actor imported it.",
    )

    @model_validator(mode="after")
    def _names_the_other_claim(self) -> ClaimsRelated:
        if self.related_claim_id is None and self.statement is None:
            raise ValueError("a relation needs related_claim_id or the related claim's statement")
        if self.related_claim_id == self.claim_id:
            raise ValueError("a claim cannot be related to itself")
        return self

    @property
    def related_key(self) -> str:
        """The relation's key: the other claim's id, or its statement key."""
        return self.related_claim_id or statement_key(self.statement or "")


class ClaimsUnrelated(Event):
    """A relation between claims was removed (it stays in the history)."""

    type: Literal["ClaimsUnrelated"] = "ClaimsUnrelated"
    related_key: str = Field(pattern=r"^(CLM-[0-9]{4,12}|stmt-[0-9a-f]{24})$")
    reason: Text | None = None
