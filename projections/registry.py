"""The one list of projections the projector keeps and the migrations cover."""

from __future__ import annotations

from projections.base import Projection
from projections.claim_pages import ClaimPagesProjection
from projections.contributors import ContributorsProjection


def build_projections() -> list[Projection]:
    """Fresh instances of every projection, in the order they are applied."""
    return [ClaimPagesProjection(), ContributorsProjection()]
