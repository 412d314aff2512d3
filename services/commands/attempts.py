"""The step both command paths repeat (the service's and the pipelined bulk's): decide against the claim's
state and append, expecting its last sequence; when another writer moved the claim, read it again and
decide again, a few times, then refuse. Also which of the claims a command refers to exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, RetryError, retry_if_exception_type, stop_after_attempt

from services.commands.decide import Kind, Rejected
from services.log import ConflictError

ATTEMPTS = 5
T = TypeVar("T")


class ReadAgain(Exception):
    """The state an attempt decided against may be behind the log: read the claim again, decide again."""


async def until_stored(
    claim_id: str, attempt: Callable[[], Awaitable[T]], *, read_again: Callable[[], Awaitable[None]] | None = None, attempts: int = ATTEMPTS,
    exhausted: Callable[[int], Exception] | None = None,
) -> T:
    """What ``attempt`` answers, calling ``read_again`` after each conflict (``ConflictError`` or
    ``ReadAgain``) and trying again at once (another writer moved the claim: nothing to wait for); after
    ``attempts`` conflicts, ``exhausted(attempts)`` is raised (by default ``Rejected`` with ``write_conflict``).
    Every conflict-retry of a write to one claim goes through here: the command service, the pipelined
    bulk path, a registry page's import."""

    async def after_conflict(_: RetryCallState) -> None:
        if read_again is not None:
            await read_again()

    retrying = AsyncRetrying(stop=stop_after_attempt(attempts), retry=retry_if_exception_type((ConflictError, ReadAgain)), after=after_conflict)
    try:
        return await retrying(attempt)
    except RetryError:
        raise (exhausted or _write_conflict(claim_id))(attempts) from None


def _write_conflict(claim_id: str) -> Callable[[int], Exception]:
    return lambda attempts: Rejected(Kind.CONFLICT, "write_conflict", f"{claim_id} kept changing during {attempts} attempts; retry")


async def existing_claims(claim_ids: Iterable[str], exists: Callable[[str], Awaitable[bool]]) -> frozenset[str]:
    """Those of ``claim_ids`` that exist, as ``exists`` says."""
    return frozenset([claim_id for claim_id in claim_ids if await exists(claim_id)])
