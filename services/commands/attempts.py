"""The step both command paths repeat (the service's and the pipelined bulk's): decide against the claim's
state and append, expecting its last sequence; when another writer moved the claim, read it again and
decide again, a few times, then refuse. Also which of the claims a command refers to exist.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

from services.commands.decide import Kind, Rejected
from services.log import ClaimLog, ConflictError

ATTEMPTS = 5
T = TypeVar("T")


class ReadAgain(Exception):
    """The state an attempt decided against may be behind the log: read the claim again, decide again."""


async def until_stored(
    claim_id: str, attempt: Callable[[], Awaitable[T]], *, read_again: Callable[[], Awaitable[None]], attempts: int = ATTEMPTS
) -> T:
    """What ``attempt`` answers, calling ``read_again`` after each conflict (``ConflictError`` or
    ``ReadAgain``) and trying again; after ``attempts`` conflicts, ``Rejected`` with ``write_conflict``."""
    for _ in range(attempts):
        try:
            return await attempt()
        except (ConflictError, ReadAgain):
            await read_again()
    raise Rejected(Kind.CONFLICT, "write_conflict", f"{claim_id} kept changing during {attempts} attempts; retry")


async def existing_claims(claim_ids: Iterable[str], exists: Callable[[str], Awaitable[bool]]) -> frozenset[str]:
    """Those of ``claim_ids`` that exist, as ``exists`` says."""
    return frozenset([claim_id for claim_id in claim_ids if await exists(claim_id)])


async def has_events(log: ClaimLog, claim_id: str, *, up_to_seq: int | None = None) -> bool:
    """Whether the claim has an event in the log, or one at or before ``up_to_seq`` when given."""
    if up_to_seq is None:
        return (await log.claim_head(claim_id)).seq > 0  # one indexed lookup
    return bool(await log.read_claim(claim_id, up_to_seq=up_to_seq))
