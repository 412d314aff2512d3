"""``claimlog parked retry``: apply a parked claim's events, in order, through the projections, once the fix is deployed."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, delete, insert

from projections.base import Projection, Record
from projections.registry import build_projections
from projections.tables import parked_events, unreadable_events
from services.admission import Admitted, Gate, gate_for
from services.log import ClaimLog, StoredEvent
from services.projector.parking import lock_checkpoints, parked_claims, parked_rows
from services.projector.rules import RuleCheck


@dataclass(frozen=True)
class Retried:
    """What a retry of one claim did: its parked events applied, or the first one that still fails."""

    claim_id: str
    applied: int
    failed_seq: int | None = None
    reason: str | None = None


async def retry_parked(claim_log: ClaimLog, engine: Engine, claim_id: str | None = None) -> list[Retried]:
    """Retry every parked claim (or one), each in one transaction of its own."""
    with engine.connect() as conn:
        claims = sorted(parked_claims(conn, None if claim_id is None else [claim_id]))
    return [await retry_claim(claim_log, engine, claim) for claim in claims]


class _StillFails(Exception):
    def __init__(self, seq: int, error: Exception) -> None:
        super().__init__(seq, error)
        self.seq, self.reason = seq, f"{type(error).__name__}: {error}"


async def retry_claim(claim_log: ClaimLog, engine: Engine, claim_id: str) -> Retried:
    """Apply the claim's parked events in log order and unpark them, all in one transaction; or, if one
    still fails, change nothing and say which and why."""
    with engine.connect() as conn:
        first = parked_claims(conn, [claim_id]).get(claim_id)
    if first is None:
        return Retried(claim_id, 0)
    stored = {e.seq: e for e in await claim_log.read_claim(claim_id, after_seq=first - 1)}
    projections = build_projections()
    gate = await gate_for(claim_log, (e.signature for e in stored.values()))
    try:
        with engine.begin() as conn:
            lock_checkpoints(conn)  # the projector parks this claim's new events, or sees it released, not both
            rows = parked_rows(conn, claim_id=claim_id)
            if any(row["seq"] not in stored for row in rows):  # parked since the read above
                stored.update((e.seq, e) for e in await claim_log.read_claim(claim_id, after_seq=max(stored, default=0)))
            rules = RuleCheck(projections)
            for row in rows:
                _apply(conn, projections, stored[row["seq"]], gate, rules)
            conn.execute(delete(parked_events).where(parked_events.c.claim_id == claim_id))
    except _StillFails as failed:
        return Retried(claim_id, 0, failed.seq, failed.reason)
    return Retried(claim_id, len(rows))


def _apply(conn: Connection, projections: list[Projection], stored: StoredEvent, gate: Gate, rules: RuleCheck) -> None:
    verdict = gate.stored(stored)  # a parked event was admitted when it was parked: the gate says so again
    if not isinstance(verdict, Admitted):
        return
    # Parked before the rules judged it (its claim's page was behind): judged now, against the page it follows.
    kept, breaches = rules.judge(conn, [Record(stored.seq, stored.stored_at, verdict.event)], {stored.seq: stored.subject})
    if breaches:
        conn.execute(insert(unreadable_events), breaches)
        return
    [record] = kept
    try:
        for projection in projections:
            projection.apply_batch(conn, [record])
    except Exception as error:
        raise _StillFails(stored.seq, error) from error
