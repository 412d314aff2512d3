"""The contributors projection: each actor's activity, and the fate of the sources and disagreements they brought.

Every event is one line of its actor's activity. Sources and disagreements are also kept by who
brought them, so "sources of theirs withdrawn or corrected" and "their disagreements' outcomes" are
one indexed read however many others acted on them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from functools import cache

from sqlalchemy import Connection, Select, Table, bindparam, select

from events.disagreement import DisagreementFiled, DisagreementResolved
from events.source import SourceAttached, SourceCorrected, SourceWithdrawn
from projections.base import Record
from projections.sql import append_rows, append_values, chunks, insert_new_values, upsert
from projections.tables import contributor_activity, contributor_disagreements, contributor_sources

# A rebuild worker's (``bulk``) claims whose rows wait in memory to be written: a bound on its memory
# however long the log (a claim left out is written, and its rows read back if it comes again).
WRITE_BEHIND_CLAIMS = 2_000


class ContributorsProjection:
    """Activity per actor, and sources and disagreements by who brought them."""

    name = "contributors"
    # 2: a second attach of a source (or filing of a disagreement) keeps what became of the first
    version = 2
    tables = (contributor_activity, contributor_sources, contributor_disagreements)

    def __init__(self, *, bulk: bool = False, held_claims: int = WRITE_BEHIND_CLAIMS) -> None:
        # ``bulk`` (a rebuild's workers, folding into a scratch place once): a claim's sources and
        # disagreements are held in memory while its events come, and written when it leaves the
        # held claims or at ``flush`` (as ClaimPagesProjection's write-behind pages), not read and
        # upserted at every batch that names them; the rows a write creates are appended with COPY
        # on PostgreSQL. A failed batch abandons such a fold, which starts again on empty tables.
        self._bulk = bulk
        self._held_claims = held_claims
        # claim -> its rows (those the tables had when it was taken in, and those folded since), by
        # table, then by (claim, id)
        self._held: OrderedDict[str, dict[Table, dict[tuple[str, str], dict]]] = OrderedDict()
        self._stored: set[tuple[str, tuple[str, str]]] = set()  # (table, key) of held rows the table has

    def apply_batch(self, conn: Connection, records: Sequence[Record]) -> None:
        """One insert of the batch's activity and one upsert each of the sources and disagreements it
        touched (in bulk, those of the claims it pushes out of the held ones)."""
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
        if self._bulk:
            sources, disagreements = self._take_in(conn, named)
        else:
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
        if self._bulk:
            self._hold(conn, {contributor_sources: sources, contributor_disagreements: disagreements})
            return
        self._write(conn, contributor_sources, sources, loaded_sources)
        self._write(conn, contributor_disagreements, disagreements, loaded_disagreements)

    def _take_in(self, conn: Connection, named: dict[Table, set]) -> list[dict]:
        """(Bulk) the held rows of the keys ``named`` (per table, by key); claims not held are taken in
        first, with every row the tables have of them, so that a key a held claim lacks is a new row."""
        held = self._held
        arriving = sorted({key[0] for keys in named.values() for key in keys if key[0] not in held})
        for chunk in chunks(arriving):
            for claim_id in chunk:
                held[claim_id] = {contributor_sources: {}, contributor_disagreements: {}}
            for table in named:
                for row in conn.execute(_rows_of_claims(table), {"claims": chunk}):
                    key = (row.claim_id, getattr(row, _ID_COLUMN[table]))
                    held[row.claim_id][table][key] = dict(row._mapping)
                    self._stored.add((table.name, key))
        return [{key: row for key in keys if (row := held[key[0]][table].get(key)) is not None} for table, keys in named.items()]

    def _hold(self, conn: Connection, rows_by_table: dict[Table, dict]) -> None:
        """(Bulk) keep the batch's rows with their claims; write those of the claims this pushes out."""
        held = self._held
        for table, rows in rows_by_table.items():
            for key, row in rows.items():
                held[key[0]][table][key] = row
                held.move_to_end(key[0])
        leaving = []
        while len(held) > self._held_claims:
            leaving.append(held.popitem(last=False)[1])
        if leaving:
            self._write_held(conn, leaving)

    def _write_held(self, conn: Connection, claims: list[dict[Table, dict]]) -> None:
        for table in (contributor_sources, contributor_disagreements):
            rows = {key: row for claim_rows in claims for key, row in claim_rows[table].items()}
            stored = {key for key in rows if (table.name, key) in self._stored}
            self._write(conn, table, rows, stored)
            self._stored.difference_update((table.name, key) for key in stored)

    def flush(self, conn: Connection) -> None:
        """(Bulk) write the rows of every held claim."""
        self._write_held(conn, list(self._held.values()))
        self._held.clear()
        self._stored.clear()

    def _write(self, conn: Connection, table, rows: dict, loaded: set) -> None:
        """Upsert the rows; in bulk on PostgreSQL, COPY those not read from the table (``loaded``): every
        row is read before it is folded, so the others are new."""
        if not self._bulk or conn.dialect.name != "postgresql":
            upsert(conn, table, list(rows.values()))
            return
        append_rows(conn, table, [row for key, row in rows.items() if key not in loaded])
        upsert(conn, table, [row for key, row in rows.items() if key in loaded])

    def forget(self) -> None:
        """Writing through, nothing is kept between batches; in bulk, held rows cannot be rolled back."""
        if self._held:
            raise RuntimeError("a write-behind fold lost contributors' rows it had not written: start the rebuild again")

    @staticmethod
    def _load(conn: Connection, table, id_column: str, keys: set[tuple[str, str]]) -> dict:
        """The rows of ``keys`` (claim and id) that earlier batches created."""
        rows: dict = {}
        # By claims and ids, then the pairs kept: not every row of each claim (a live projector
        # attaching to a claim with hundreds of sources read them all at every attach: 0.4 ms at p50
        # of the latency bench), and not a list of pairs, which SQLite matched 8 us an event slower
        # on the backlog bench. One statement, built once, its lists expanded per execution: a query
        # naming each pair compiled anew for every batch cost a quarter of the projector's time.
        for chunk in chunks(sorted(keys)):
            claims, ids = sorted({claim for claim, _ in chunk}), sorted({id_ for _, id_ in chunk})
            for row in conn.execute(_rows_of(table, id_column), {"claims": claims, "ids": ids}):
                key = (row.claim_id, getattr(row, id_column))
                if key in keys:
                    rows[key] = dict(row._mapping)
        return rows


@cache
def _rows_of_claims(table: Table) -> Select:
    """``SELECT * FROM table WHERE claim_id IN (...)``, the list bound at execution."""
    return select(table).where(table.c.claim_id.in_(bindparam("claims", expanding=True)))


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

_ID_COLUMN = {contributor_sources: "source_id", contributor_disagreements: "disagreement_id"}

# Which id names what an event acted on, by the event family (its type's first word).
SUBJECT_FIELDS = (("Source", "source_id"), ("Disagreement", "disagreement_id"), ("Review", "review_id"))


@cache
def _subject_field(event_type: str) -> str | None:
    """The field naming what an event of this type acted on (looked up once per type: once per event
    it was 3 % of the live projector's time)."""
    return next((name for prefix, name in SUBJECT_FIELDS if event_type.startswith(prefix)), None)
