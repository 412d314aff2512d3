"""The read models against a fresh replay: live table checksums vs a scratch database rebuilt from the log
by ``services/rebuild/scratch.py`` (``rebuild_checksums``), each partition through the position the live
checkpoints stand at.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, or_, select

from projections.checksum import table_checksums
from projections.repeats import REPEAT_REASON_PREFIX
from projections.tables import checkpoints, unreadable_events
from services.admission import RULE_REASON_PREFIX
from services.audit.verify import Finding, Report
from services.log import ClaimLog
from services.rebuild.scratch import Positions, fold_to_positions, scratch_database

ATTEMPTS = 5
RETRY_PAUSE = 0.2  # seconds between reads of a moving projector's tables


def live_checksums(engine: Engine) -> tuple[Positions | None, dict[str, str]]:
    """The live positions and the table checksums at them (None when nothing was ever projected).

    The projector may be running: the positions are read before and after the checksums, and a read
    during which they moved is done again (a commit always moves its partition's, with the rows, in
    one transaction). The partitions of a partitioned log stand each at its own sequence.
    """
    positions: Positions | str | None = None
    for _ in range(ATTEMPTS):
        with engine.connect() as conn:
            positions = _positions(conn)
            sums = table_checksums(conn)
        with engine.connect() as conn:
            if not isinstance(positions, str) and _positions(conn) == positions:
                return positions, sums
        time.sleep(RETRY_PAUSE)
    if isinstance(positions, str):
        raise RuntimeError(f"{positions} in each of {ATTEMPTS} reads: let the projector catch up with the log, or rebuild them with replay")
    raise RuntimeError(f"the projector moved during each of {ATTEMPTS} reads of the read models: stop it, or retry")


def _positions(conn) -> Positions | str | None:
    """The checkpoints as ``Positions``, or why they are not one consistent point."""
    rows = conn.execute(select(checkpoints.c.partition, checkpoints.c.partitions, checkpoints.c.last_seq)).all()
    if not rows:
        return None
    counts = {written_for for _, written_for, _ in rows}
    at: dict[int, set[int]] = {}
    for partition, _, seq in rows:
        at.setdefault(partition, set()).add(seq)
    partitions = counts.pop() if len(counts) == 1 else 0
    if partitions < 1 or any(len(seqs) > 1 for seqs in at.values()) or (partitions == 1 and len(at) > 1):
        standing = sorted({seq for _, _, seq in rows})
        return f"the projections stood at different sequences {standing}"
    return Positions(partitions, {partition: seqs.pop() for partition, seqs in at.items()})


async def compare_read_models(
    claim_log: ClaimLog, live_engine: Engine, report: Report, *, progress: Callable[[int], None] | None = None
) -> None:
    """Add a finding for every read-model table whose rows differ from a fresh replay to the live positions."""
    try:
        positions, live = live_checksums(live_engine)
    except RuntimeError as error:
        report.add(Finding("read_models", str(error)))
        return
    if positions is None:
        report.tables_note = "the read models were never projected: nothing to compare"
        return
    if positions.partitions not in (1, claim_log.layout.partitions):
        report.add(Finding(
            "read_models",
            f"the checkpoints were written for {positions.partitions} partitions, the log has {claim_log.layout.partitions}: "
            "rebuild the read models with replay",
        ))
        return
    at_seq = positions.head
    fresh, repeats = await rebuild_checksums(claim_log, live_engine, positions, progress=progress)
    report.tables_at_seq = at_seq
    for seq, subject, reason in repeats:
        kind = "repeat" if reason.startswith(REPEAT_REASON_PREFIX) else "rule"
        report.add(Finding(kind, reason, seq, subject, _claim_of(claim_log, subject)))
    for table in sorted(live.keys() | fresh.keys()):
        if live.get(table) != fresh.get(table):
            report.add(
                Finding("table", f"{table} differs from a fresh replay of the log to sequence {at_seq}", at_seq, table=table)
            )


async def rebuild_checksums(
    claim_log: ClaimLog, live_engine: Engine, until: int | Positions, *, progress: Callable[[int], None] | None = None
) -> tuple[dict[str, str], list[tuple[int, str, str]]]:
    """Table checksums of read models replayed from the log into a scratch database: through ``until``,
    or each partition through its own position; and the repeats and the events against the rules the replay
    folded no projection with (sequence, subject, reason: projections/repeats.py, events/rules.py), read from
    its tables rather than kept in memory."""
    positions = until if isinstance(until, Positions) else Positions(1, {0: until})
    with scratch_database(live_engine) as scratch:
        await fold_to_positions(claim_log, scratch, positions, progress=progress)
        with scratch.connect() as conn:
            return table_checksums(conn), _repeats(conn)


def _repeats(conn: Connection) -> list[tuple[int, str, str]]:
    """The repeats and the events against the rules among the unreadable events, in log order. (The rest
    the log check names from the log itself: a replay judges the rules, which read each claim's earlier
    events, without keeping every claim's in memory.)"""
    reason = unreadable_events.c.reason
    query = (
        select(unreadable_events.c.seq, unreadable_events.c.subject, reason)
        .where(or_(reason.startswith(REPEAT_REASON_PREFIX, autoescape=True), reason.startswith(RULE_REASON_PREFIX, autoescape=True)))
        .order_by(unreadable_events.c.seq)
    )
    return [tuple(row) for row in conn.execute(query)]


def _claim_of(claim_log: ClaimLog, subject: str) -> str | None:
    try:
        return claim_log.layout.claim_of(subject)
    except ValueError:
        return None
