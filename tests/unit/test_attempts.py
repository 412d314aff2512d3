"""The write step both command paths share: read again after a conflict, refuse after a few."""

from __future__ import annotations

import pytest

from services.commands.attempts import ATTEMPTS, ReadAgain, existing_claims, until_stored
from services.commands.decide import Kind, Rejected
from services.log import ConflictError


class Moving:
    """A claim another writer moves ``times`` times before an attempt lands."""

    def __init__(self, times: int, error: type[Exception] = ConflictError) -> None:
        self.times, self.error, self.attempts, self.reads = times, error, 0, 0

    async def attempt(self) -> str:
        self.attempts += 1
        if self.attempts <= self.times:
            raise ConflictError("CLM-0001", self.attempts, "moved") if self.error is ConflictError else self.error()
        return "stored"

    async def read_again(self) -> None:
        self.reads += 1


@pytest.mark.parametrize("error", [ConflictError, ReadAgain])
async def test_a_claim_that_moved_is_read_again_and_the_command_decided_again(error):
    claim = Moving(ATTEMPTS - 1, error)
    assert await until_stored("CLM-0001", claim.attempt, read_again=claim.read_again) == "stored"
    assert (claim.attempts, claim.reads) == (ATTEMPTS, ATTEMPTS - 1)


async def test_a_claim_that_keeps_moving_is_refused_as_a_write_conflict():
    claim = Moving(ATTEMPTS)
    with pytest.raises(Rejected) as refused:
        await until_stored("CLM-0001", claim.attempt, read_again=claim.read_again)
    assert refused.value.reason == "write_conflict" and "CLM-0001 kept changing" in refused.value.message
    assert (claim.attempts, claim.reads) == (ATTEMPTS, ATTEMPTS)


async def test_a_refusal_is_not_retried():
    async def refused() -> None:
        raise Rejected(Kind.CONFLICT, "source_exists", "s1 is on the claim")

    async def never() -> None:
        raise AssertionError("a refusal is final: nothing to read again")

    with pytest.raises(Rejected, match="s1 is on the claim"):
        await until_stored("CLM-0001", refused, read_again=never)


async def test_existing_claims_are_those_the_check_says_exist():
    async def exists(claim_id: str) -> bool:
        return claim_id != "CLM-0002"

    assert await existing_claims({"CLM-0001", "CLM-0002"}, exists) == frozenset({"CLM-0001"})
    assert await existing_claims(set(), exists) == frozenset()
