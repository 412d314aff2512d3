"""Checkpoints written by shares of the claims on an unpartitioned log, brought to one position.

A share folds the claims whose id hashes to it (``claim_partition``) while reading the whole log,
with checkpoint rows of its own. The live projector of an unpartitioned log (CLAIMLOG_PARTITIONS=0)
is one process; a partitioned log is divided among projector workers instead
(``services/projector/worker.py``), each receiving only its partitions' events, which shares never
did. Rows of another number of shares (left by projectors that ran as shares, or by a test) can be
divided anew only while they stand at one position (an event folded twice would count twice):
``level`` lets the lagging shares catch up with the foremost before one process takes over.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, select

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter

log = logging.getLogger(__name__)


def consumer_name(projector_name: str, share: int, shares: int) -> str:
    """The durable consumer of one share (the projector's own name when it runs as one process)."""
    return projector_name if shares == 1 else f"{projector_name}-s{share}of{shares}"


async def level(claim_log: ClaimLog, engine: Engine, *, shares: int, name: str, batch: int) -> None:
    """Bring checkpoints written for another number of shares than ``shares`` to one position, so that
    the shares about to start can divide them anew: each lagging share of the old number catches up
    with the foremost, as that share's projector would have. The old number's durable consumers,
    which nothing will read again, are deleted."""
    names = [p.name for p in build_projections()]
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints).where(checkpoints.c.name.in_(names))).all()
    written_for = {row.shares for row in rows}
    if not rows or written_for == {shares} or len(written_for) > 1:
        return  # nothing to divide, or nothing this can mend (load_checkpoint says what is wrong)
    old = written_for.pop()
    head = max(row.last_seq for row in rows)
    for share in range(old):
        if all(row.last_seq == head for row in rows if row.share == share):
            continue
        leveller = f"{name}-level-s{share}of{old}"
        log.info("share %s of %s stands behind sequence %s: bringing it there before %s share(s) run", share, old, head, shares)
        writer = CheckpointedWriter(engine, build_projections(), partitions=old)
        projector = Runner(claim_log, writer, name=leveller, batch=batch, scope=Scope(share=(share, old), stop_at=head))
        try:
            await projector.run_until(head, timeout=None)
        finally:
            await claim_log.forget_consumer(leveller)
    for share in range(old):
        await claim_log.forget_consumer(consumer_name(name, share, old))
