"""How a new read-model generation differs from the active one: tables by checksum, claim pages field by field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sqlalchemy import Connection, Engine, select

from projections.checksum import table_checksums
from projections.tables import checkpoints, claim_pages


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


def compare(old: Engine, new: Engine, *, limit: int = 50) -> Diff:
    """Table checksums and, for claim pages, which claims' pages differ and in which fields.

    The two generations may stand at different sequences (the live one keeps moving): a claim whose
    page differs only because the live one has seen newer events is not reported.
    """
    with old.connect() as a, new.connect() as b:
        old_seq, new_seq = _position(a), _position(b)
        old_sums, new_sums = table_checksums(a), table_checksums(b)
        report = Diff(old_seq, new_seq, tables_differing=[t for t in new_sums if old_sums.get(t) != new_sums[t]])
        if "claim_pages" in report.tables_differing:
            _page_differences(a, b, min(old_seq, new_seq), report, limit)
    return report


def _position(conn: Connection) -> int:
    return min(conn.execute(select(checkpoints.c.last_seq)).scalars(), default=0)


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
