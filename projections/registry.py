"""The one list of projections the projector keeps and the migrations cover."""

from __future__ import annotations

from projections.base import Projection
from projections.claim_pages import ClaimPagesProjection
from projections.contributors import ContributorsProjection


def build_projections(*, write_behind: bool = False) -> list[Projection]:
    """Fresh instances of every projection, in the order they are applied (``write_behind``: for a
    rebuild's workers, see ClaimPagesProjection)."""
    return [ClaimPagesProjection(write_behind=write_behind), ContributorsProjection(bulk=write_behind)]
