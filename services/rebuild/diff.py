"""How a new read-model generation differs from the active one: tables by checksum, claim pages field by field.

The checkpoint rows are no part of what a generation says: a live generation keeps one per partition,
at that partition's last applied event, and a rebuilt one a row for the whole log, so two generations
that applied the same events hold different rows. What they are compared by is their projections'
versions and their positions (``services/projector/applied.py``: every event at or below it applied),
read of the log with the one definition every other reader uses.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, select

from projections.checksum import table_checksums
from projections.tables import checkpoints, claim_pages
from services.log import ClaimLog
from services.projector.applied import applied


@dataclass
class Diff:
    """How a new generation differs from the active one, claim by claim and table by table."""

    old_seq: int
    new_seq: int
    tables_differing: list[str] = field(default_factory=list)
    claims_changed: list[tuple[str, list[str]]] = field(default_factory=list)  # claim, top-level page fields
    claims_only_new: list[str] = field(default_factory=list)
    claims_only_old: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.tables_differing or self.claims_changed or self.claims_only_new or self.claims_only_old)


async def diff_generations(claim_log: ClaimLog, old: Engine, new: Engine, *, limit: int = 50) -> Diff:
    """``compare`` at the two generations' positions, read of the log now."""
    old_seq, new_seq = await asyncio.gather(_position(claim_log, old), _position(claim_log, new))
    return await asyncio.to_thread(compare, old, new, old_seq=old_seq, new_seq=new_seq, limit=limit)


def compare(old: Engine, new: Engine, *, old_seq: int, new_seq: int, limit: int = 50) -> Diff:
    """Table checksums (the checkpoints by their projections' versions) and, for claim pages, which claims'
    pages differ and in which fields, of generations at positions ``old_seq`` and ``new_seq``.

    The two generations may stand at different sequences (the live one keeps moving): a claim whose
    page differs only because the live one has seen newer events is not reported.
    """
    with old.connect() as a, new.connect() as b:
        old_sums, new_sums = table_checksums(a), table_checksums(b)
        differing = [t for t in new_sums if t != checkpoints.name and old_sums.get(t) != new_sums[t]]
        if _versions(a) != _versions(b):
            differing.append(checkpoints.name)
        report = Diff(old_seq, new_seq, tables_differing=differing)
        if "claim_pages" in report.tables_differing:
            _page_differences(a, b, min(old_seq, new_seq), report, limit)
    return report


async def _position(claim_log: ClaimLog, engine: Engine) -> int:
    """The lowest of the generation's projections' positions."""
    found = await applied(claim_log, engine)
    if found.unknown is not None:
        raise RuntimeError(f"the position of the read models cannot be read: {found.unknown}")
    return min((seq for seq in found.positions.values() if seq is not None), default=0)


def _versions(conn: Connection) -> dict[str, int]:
    return dict(conn.execute(select(checkpoints.c.name, checkpoints.c.version).distinct()).all())


def _page_differences(old: Connection, new: Connection, upto: int, report: Diff, limit: int) -> None:
    query = select(claim_pages.c.claim_id, claim_pages.c.last_seq, claim_pages.c.doc).order_by(claim_pages.c.claim_id)
    old_rows = {row.claim_id: row for row in old.execute(query)}
    for row in new.execute(query):
        before = old_rows.pop(row.claim_id, None)
        if before is None:
            if row.last_seq <= upto and len(report.claims_only_new) < limit:
                report.claims_only_new.append(row.claim_id)
            continue
        if before.last_seq != row.last_seq or before.doc == row.doc:
            continue  # one of them has seen newer events, or they agree
        a, b = json.loads(before.doc), json.loads(row.doc)
        fields = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        if len(report.claims_changed) < limit:
            report.claims_changed.append((row.claim_id, fields))
    report.claims_only_old = [claim for claim, row in old_rows.items() if row.last_seq <= upto][:limit]
