"""The slugs' owners rebuilt from the log alone: every ``ClaimDrafted``'s slug, the first one drafted wins.

The bucket of slugs is derived state: a restore rebuilds it from the restored log instead of
restoring a copy (a copy taken at another moment than the log names claims the log does not hold).
"""

from __future__ import annotations

from services.admission import Admitted, gate_for
from services.commands.slugs import SlugOwners
from services.log import ClaimLog

PAGE = 1000
DRAFTED = ".ClaimDrafted"


async def owners_in_log(log: ClaimLog, *, up_to_seq: int | None = None) -> dict[str, str]:
    """Each slug drafted in the log (up to ``up_to_seq``, else its head) and the claim drafted first with it."""
    head = await log.head() if up_to_seq is None else up_to_seq
    owners: dict[str, str] = {}
    drafted: set[str] = set()  # a claim is drafted once (events/rules.py): a second draft is refused, and takes no slug
    after = 0
    while after < head:
        page = await log.read_log(after_seq=after, limit=PAGE)
        if not page:
            break
        gate = await gate_for(log, (stored.signature for stored in page))
        for stored in page:
            if stored.seq <= head and stored.subject.endswith(DRAFTED):
                verdict = gate.stored(stored)  # a draft the gate refuses (unreadable, forged) drafts nothing
                if isinstance(verdict, Admitted) and verdict.event.claim_id not in drafted:
                    drafted.add(verdict.event.claim_id)
                    owners.setdefault(verdict.event.slug, verdict.event.claim_id)
        after = page[-1].seq
    return owners


async def rebuild_slugs(log: ClaimLog, slugs: SlugOwners) -> int:
    """Record every slug's owner as the log says; returns how many slugs the log names."""
    owners = await owners_in_log(log)
    await slugs.record(owners)
    return len(owners)
