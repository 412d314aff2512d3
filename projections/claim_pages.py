"""The claim-pages projection: one row per claim holding its page, with the columns lists filter on."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from functools import cache

from sqlalchemy import Connection, Update, bindparam, select, update

from events.relation import statement_key
from events.rules import ClaimFacts
from projections.base import Record
from projections.claim_page import apply, derive, facts_of
from projections.page_model import PAGE, ClaimPage
from projections.sql import chunks, execute_many, insert_new, upsert
from projections.tables import RELATION_COLUMNS, SQLITE_SEARCH_TABLE, claim_pages, page_snapshots

CACHE_PAGES = 20_000
# A snapshot of a claim's page is kept after every this many of the claim's events: an as-of read then
# folds fewer than this many events read from the log (services/timeline/as_of.py). A claim of ten
# events, most of them, never has one. Every 100 left a long claim's as-of page over its target on a
# slow machine (docs/architecture.md); reading the snapshot itself is the larger part that remains.
SNAPSHOT_EVERY = 25
# A rebuild worker's cache: its pages wait there to be written, so it bounds the worker's memory
# however long the log (pages left out are written, and read back if their claim comes again).
WRITE_BEHIND_PAGES = 2_000


class ClaimPagesProjection:
    """Folds every event into its claim's page; keeps recently touched pages in memory between batches.

    ``write_behind`` (a rebuild's workers only): a page is written when it leaves the cache or at
    ``flush``, not after every batch that touches it, so a page is serialized and written about once
    however its events are spread over the log. The tables then lag the checkpoint until ``flush``,
    so such a fold cannot resume after a failed batch: it must start again (``forget`` says so).
    """

    name = "claim_pages"
    # 2: standing and the scorecard rules (projections/scorecard.py, RULES_VERSION 1)
    # 3: the page counts the events it folds; snapshots for as-of reads
    # 4: a snapshot every 25 events, not 100
    # 5: related claims carry review_state_now and label_disagrees (filled on read)
    # 6: imported sources and relations say where they were imported from
    # 7: reviews by the drafter, by a model of the drafting model's name, or by a service are not folded
    #    (RULES_VERSION 2)
    # 8: an event whose event_id its claim has folded already is a repeat, folded by no projection
    # 9: the status names the evidence and the counted standing apart (evidence, counted_standing); repeats
    #    are recognised per actor (another actor's event with the same event_id is folded)
    # 10: an imported draft is its importer's, with the page and who the page says drafted it (notes.drafted_by;
    #     ClaimDrafted version 2), and the same of a draft imported before, as the registry-drafter's (the upcaster)
    # 11: an event against the contract's rules (events/rules.py) is refused by the gate, folded by no
    #     projection; the fold no longer passes over such reviews itself
    version = 11
    tables = (claim_pages, page_snapshots)

    def __init__(self, *, write_behind: bool = False, cache_pages: int | None = None) -> None:
        self._cache: OrderedDict[str, ClaimPage] = OrderedDict()
        self._write_behind = write_behind
        self._cache_pages = cache_pages or (WRITE_BEHIND_PAGES if write_behind else CACHE_PAGES)
        self._dirty: set[str] = set()
        # Per cached page (writing through): its row's columns as the table has them, but the document.
        self._written: dict[str, dict] = {}
        self._read: dict[str, ClaimPage | None] = {}  # pages read for ``facts``, which the next batch folds into

    def facts(self, conn: Connection, claim_ids: list[str]) -> dict[str, ClaimFacts]:
        """What the contract's rules read of each claim as its page stands before the next batch (the
        projector judges the batch's events by them: events/rules.py)."""
        self._read = self._load(conn, claim_ids)
        return {claim_id: facts_of(page, claim_id) for claim_id, page in self._read.items()}

    def apply_batch(self, conn: Connection, records: Sequence[Record]) -> None:
        """Load the touched pages, fold the batch into them and write them back."""
        read, self._read = self._read, {}
        pages = self._load(conn, list(dict.fromkeys(r.event.claim_id for r in records)), read)
        snapshots = []
        for record in records:
            claim_id = record.event.claim_id
            page = pages[claim_id] = apply(pages.get(claim_id), record.event, record.seq, record.at)
            if page is not None and page.event_count % SNAPSHOT_EVERY == 0:
                snapshots.append(snapshot_row(derive(page)))
        insert_new(conn, page_snapshots, snapshots)  # a retried batch finds its snapshots there already
        touched = [(claim_id, page) for claim_id, page in pages.items() if page is not None]
        if self._write_behind:
            evicted = []
            for claim_id, page in touched:
                evicted.extend(self._remember(claim_id, page))
                self._dirty.add(claim_id)
            upsert(conn, claim_pages, [page_row(derive(p)) for p in evicted])
            return
        self._write(conn, [page_row(derive(page)) for _, page in touched])
        for claim_id, page in touched:
            self._remember(claim_id, page)

    def _write(self, conn: Connection, rows: list[dict]) -> None:
        """Insert new pages; update, of the others, only the columns that changed.

        An update that names a column rewrites every index on it (and SQLite's full-text index on
        the statement) even when its value is the same: an event typically changes the document,
        ``last_seq`` and a count or two, so naming only those halves the projector's write time.
        """
        new, changed_by_columns = [], defaultdict(list)
        for row in rows:
            claim_id = row["claim_id"]
            before = self._written.get(claim_id)
            if before is None:
                new.append(row)
            else:
                changed = tuple(c for c in UPDATABLE if row[c] != before[c])
                changed_by_columns[changed].append({"pk": claim_id, "doc": row["doc"], **{c: row[c] for c in changed}})
            self._written[claim_id] = {c: row[c] for c in UPDATABLE}
        insert_new(conn, claim_pages, new)  # a page another projector wrote meanwhile fails its checkpoint instead
        if new and conn.dialect.name == "sqlite":
            # New statements enter SQLite's search index here, in one statement, rather than by a trigger
            # per row (migration 0010: half a new page's cost). Changed statements still go by trigger.
            conn.exec_driver_sql(SQLITE_SEARCH_INSERT, [(row["first_seq"], row["statement"]) for row in new])
        for changed, updates in changed_by_columns.items():
            execute_many(conn, _update_statement(("doc", *changed)), updates)

    def flush(self, conn: Connection) -> None:
        """Write every page folded since it was last written (write-behind)."""
        upsert(conn, claim_pages, [page_row(derive(self._cache[c])) for c in sorted(self._dirty) if c in self._cache])
        self._dirty.clear()

    def forget(self) -> None:
        """Drop cached pages (the batch that changed them rolled back)."""
        if self._write_behind and self._dirty:
            raise RuntimeError("a write-behind fold lost pages it had not written: start the rebuild again")
        self._cache.clear()
        self._written.clear()
        self._read = {}

    def _load(self, conn: Connection, claim_ids: list[str], read: dict[str, ClaimPage | None] | None = None) -> dict[str, ClaimPage | None]:
        """The pages of ``claim_ids``: cached, just ``read`` (in this transaction), or read from the table."""
        pages: dict[str, ClaimPage | None] = {}
        missing = []
        for claim_id in claim_ids:
            cached = self._cache.get(claim_id)
            if cached is None and read and claim_id in read:
                pages[claim_id] = read[claim_id]  # None there: the table has no page of it either
                continue
            if cached is None:
                missing.append(claim_id)
            pages[claim_id] = cached
        for chunk in chunks(missing):
            query = select(claim_pages).where(claim_pages.c.claim_id.in_(chunk))
            for row in conn.execute(query).mappings():
                pages[row["claim_id"]] = PAGE.validate_json(row["doc"])
                if not self._write_behind:
                    self._written[row["claim_id"]] = {c: row[c] for c in UPDATABLE}
        return pages

    def _remember(self, claim_id: str, page: ClaimPage) -> list[ClaimPage]:
        """Keep the page; returns the dirty pages this pushed out of the cache (write-behind writes them)."""
        self._cache[claim_id] = page
        self._cache.move_to_end(claim_id)
        evicted = []
        while len(self._cache) > self._cache_pages:
            old_id, old_page = self._cache.popitem(last=False)
            self._written.pop(old_id, None)
            if old_id in self._dirty:
                self._dirty.discard(old_id)
                evicted.append(old_page)
        return evicted


def page_row(page: ClaimPage, *, with_doc: bool = True) -> dict:
    """The claim_pages row for a page (without its JSON document when ``with_doc`` is False)."""
    counts, status = page.counts, page.status
    return {
        "claim_id": page.claim_id,
        "slug": page.slug,
        "statement": page.statement,
        "statement_key": statement_key(page.statement),
        "capability": page.capability,
        "technique": page.technique,
        "lifecycle": status.lifecycle,
        "review_state": status.review_state,
        "revision": page.revision,
        "counts_toward_scorecard": status.counts_toward_scorecard,
        "unreviewed_model_draft": status.unreviewed_model_draft,
        "standing": status.standing,
        "sources_active": counts.sources_active,
        "sources_withdrawn": counts.sources_withdrawn,
        **{column: counts.sources_by_relation.get(relation, 0) for relation, column in RELATION_COLUMNS.items()},
        "disagreements_open": counts.disagreements_open,
        "disagreements_resolved": counts.disagreements_resolved,
        "reviews_person": counts.reviews_person,
        "reviews_ai": counts.reviews_ai,
        "contention": counts.disagreements_open + counts.sources_by_relation.get("contradicts", 0),
        "first_seq": page.notes.drafted.seq,
        "last_seq": page.as_of_seq,
        **({"doc": PAGE.dump_json(page).decode()} if with_doc else {}),
    }


def snapshot_row(page: ClaimPage) -> dict:
    """The page_snapshots row of a (derived) page: the page as it stood after its last event."""
    return {"claim_id": page.claim_id, "seq": page.as_of_seq, "at": page.as_of_time, "doc": PAGE.dump_json(page).decode()}


SQLITE_SEARCH_INSERT = f"INSERT INTO {SQLITE_SEARCH_TABLE}(rowid, statement) VALUES (?, ?)"

# The columns an update may change: all but the key, the first sequence (never changes) and the
# document (always changes, so always written).
UPDATABLE = tuple(c.name for c in claim_pages.columns if c.name not in {"claim_id", "first_seq", "doc"})


@cache
def _update_statement(columns: tuple[str, ...]) -> Update:
    """``UPDATE claim_pages SET <columns> WHERE claim_id = :pk``, built once per set of columns."""
    return update(claim_pages).where(claim_pages.c.claim_id == bindparam("pk")).values({c: bindparam(c) for c in columns})
