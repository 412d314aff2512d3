"""A registry page's import when another writer moves its claim meanwhile: decided again against the claim
as it is now, a few times, then refused naming how many (services/ingest/pages.py, through the one
conflict-retry of a write to a claim, services/commands/attempts.py)."""

from __future__ import annotations

import pytest

from services.commands.attempts import ATTEMPTS
from services.commands.slugs import slug_owners
from services.ingest.pages import import_page, read_page, sample_pages
from services.log import ClaimLog, ConflictError


def moving(claim_log: ClaimLog, monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The claim log's appends refused as conflicts ``times`` times; the expected sequences they carried."""
    real, seen = claim_log.append, []

    async def append(claim_id: str, events, **options):
        if len(seen) < times:
            seen.append(options["expected_seq"])
            raise ConflictError(claim_id, options["expected_seq"], "another writer")
        return await real(claim_id, events, **options)

    monkeypatch.setattr(claim_log, "append", append)
    return seen


async def test_a_page_whose_claim_moved_is_decided_again_and_stored_once(claim_log: ClaimLog, monkeypatch: pytest.MonkeyPatch):
    page = read_page(sample_pages()[0])
    refused = moving(claim_log, monkeypatch, 2)
    outcome = await import_page(claim_log, page)
    assert refused == [0, 0] and outcome.published > 0 and outcome.error is None
    assert len(await claim_log.read_claim(page.claim_id)) == outcome.published  # stored once


async def test_a_page_whose_claim_keeps_moving_is_refused_naming_its_attempts_and_gives_its_slug_back(
    claim_log: ClaimLog, monkeypatch: pytest.MonkeyPatch
):
    page = read_page(sample_pages()[0])
    refused = moving(claim_log, monkeypatch, ATTEMPTS)
    with pytest.raises(ConflictError, match=f"other writers moved it during all {ATTEMPTS} attempts"):
        await import_page(claim_log, page)
    assert len(refused) == ATTEMPTS
    assert await claim_log.read_claim(page.claim_id) == []
    owner, _ = await slug_owners(claim_log).take(page.slug, "CLM-0001")  # the slug is free again
    assert owner == "CLM-0001"
