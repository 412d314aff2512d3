"""The contributors projection: each actor's activity, and the fate of the sources and disagreements they brought.

Every event is one line of its actor's activity. Sources and disagreements are also kept by who
brought them, so "sources of theirs withdrawn or corrected" and "their disagreements' outcomes" are
one indexed read however many others acted on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from sqlalchemy import Connection, Select, Table, bindparam, select

from events.disagreement import DisagreementFiled, DisagreementResolved
from events.source import SourceAttached, SourceCorrected, SourceWithdrawn
from projections.base import Record
from projections.sql import append_rows, append_values, chunks, insert_new_values, upsert
from projections.tables import contributor_activity, contributor_disagreements, contributor_sources


class ContributorsProjection:
    """Activity per actor, and sources and disagreements by who brought them."""

    name = "contributors"
    # 2: a second attach of a source (or filing of a disagreement) keeps what became of the first
    # 3: an event whose event_id its claim has folded already is a repeat, folded by no projection
    # 4: repeats are recognised per actor: another actor's event with the same event_id is folded
    # 5: a draft imported as the registry-drafter's (ClaimDrafted version 1) is its importer's (the upcaster)
    # 6: an event against the contract's rules (events/rules.py) is refused by the gate, folded by no projection
    version = 6
    tables = (contributor_activity, contributor_sources, contributor_disagreements)

    def __init__(self, *, bulk: bool = False) -> None:
        # ``bulk`` (a rebuild's workers, folding into a scratch place once): the rows a batch creates are
        # appended with COPY on PostgreSQL. A failed batch abandons such a fold, which starts again on
        # empty tables.
        self._bulk = bulk

    def apply_batch(self, conn: Connection, records: Sequence[Record]) -> None:
        """One insert of the batch's activity and one upsert each of the sources and disagreements it touched."""
        if not records:
            return
        (append_values if self._bulk else insert_new_values)(conn, contributor_activity, [activity_row(r) for r in records])
        # Every source and disagreement the batch names is read first, so that a second attach or
        # filing of one (a producer writing to the log directly can) keeps what became of the first,
        # as the page does, whichever batch the first was applied in.
        named: dict[Table, set] = {table: set() for table in (contributor_sources, contributor_disagreements)}
        for record in records:  # one pass over the batch for both lookups
            event = record.event
            if (table := _NAMED_IN.get(type(event))) is not None:
                named[table].add((event.claim_id, getattr(event, _subject_field(event.type))))
        sources = self._load(conn, contributor_sources, "source_id", named[contributor_sources])
        disagreements = self._load(conn, contributor_disagreements, "disagreement_id", named[contributor_disagreements])
        loaded_sources, loaded_disagreements = set(sources), set(disagreements)
        for record in records:
            event = record.event
            if isinstance(event, SourceAttached):
                sources.setdefault((event.claim_id, event.source_id), {
                    "claim_id": event.claim_id, "source_id": event.source_id, "brought_by": event.actor.id,
                    "relation": event.relation, "withdrawn": False, "corrections": 0,
                })
            elif isinstance(event, SourceCorrected) and (row := sources.get((event.claim_id, event.source_id))):
                row["corrections"] += 1
                row["relation"] = event.relation or row["relation"]
            elif isinstance(event, SourceWithdrawn) and (row := sources.get((event.claim_id, event.source_id))):
                row["withdrawn"] = True
            elif isinstance(event, DisagreementFiled):
                disagreements.setdefault((event.claim_id, event.disagreement_id), {
                    "claim_id": event.claim_id, "disagreement_id": event.disagreement_id,
                    "filed_by": event.actor.id, "outcome": None,
                })
            elif isinstance(event, DisagreementResolved) and (row := disagreements.get((event.claim_id, event.disagreement_id))):
                row["outcome"] = row["outcome"] or event.outcome
        self._write(conn, contributor_sources, sources, loaded_sources)
        self._write(conn, contributor_disagreements, disagreements, loaded_disagreements)

    def _write(self, conn: Connection, table, rows: dict, loaded: set) -> None:
        """Upsert the rows; in bulk on PostgreSQL, COPY those this batch created (every row the batch
        names was read first, so those not read are new)."""
        if not self._bulk or conn.dialect.name != "postgresql":
            upsert(conn, table, list(rows.values()))
            return
        append_rows(conn, table, [row for key, row in rows.items() if key not in loaded])
        upsert(conn, table, [row for key, row in rows.items() if key in loaded])

    def forget(self) -> None:
        """Nothing is kept in memory between batches."""

    @staticmethod
    def _load(conn: Connection, table, id_column: str, keys: set[tuple[str, str]]) -> dict:
        """The rows of ``keys`` (claim and id) that earlier batches created."""
        rows: dict = {}
        # By claims and ids, then the pairs kept: not every row of each claim (a live projector
        # attaching to a claim with hundreds of sources would read them all at every attach, which
        # shows in the latency bench), and not a list of pairs, which SQLite matches more slowly. One
        # statement, built once, its lists expanded per execution: a query naming each pair would be
        # compiled anew for every batch, a large share of the projector's time.
        for chunk in chunks(sorted(keys)):
            claims, ids = sorted({claim for claim, _ in chunk}), sorted({id_ for _, id_ in chunk})
            for row in conn.execute(_rows_of(table, id_column), {"claims": claims, "ids": ids}):
                key = (row.claim_id, getattr(row, id_column))
                if key in keys:
                    rows[key] = dict(row._mapping)
        return rows


@cache
def _rows_of(table: Table, id_column: str) -> Select:
    """``SELECT * FROM table WHERE claim_id IN (...) AND <id> IN (...)``, the lists bound at execution."""
    return select(table).where(
        table.c.claim_id.in_(bindparam("claims", expanding=True)), table.c[id_column].in_(bindparam("ids", expanding=True))
    )


def activity_row(record: Record) -> tuple:
    """One line of the acting actor's activity: its values in ``contributor_activity``'s column order."""
    event = record.event
    actor = event.actor
    field = _subject_field(event.type)
    return (
        record.seq,
        actor.id,
        str(actor.kind),  # the kind's text (an enum's ``.value`` is a Python-level property)
        actor.model,
        event.claim_id,
        event.type,
        getattr(event, field) if field else None,
        record.at,
    )


# The table keeping what an event names, for the events that create or change a row there.
_NAMED_IN = {
    SourceAttached: contributor_sources, SourceCorrected: contributor_sources, SourceWithdrawn: contributor_sources,
    DisagreementFiled: contributor_disagreements, DisagreementResolved: contributor_disagreements,
}

# Which id names what an event acted on, by the event family (its type's first word).
SUBJECT_FIELDS = (("Source", "source_id"), ("Disagreement", "disagreement_id"), ("Review", "review_id"))


@cache
def _subject_field(event_type: str) -> str | None:
    """The field naming what an event of this type acted on (looked up once per type, not once per
    event: the live projector asks at every event)."""
    return next((name for prefix, name in SUBJECT_FIELDS if event_type.startswith(prefix)), None)
