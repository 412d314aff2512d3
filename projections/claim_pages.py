"""The claim-pages projection: one row per claim holding its page, with the columns lists filter on."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from sqlalchemy import Connection, select

from events.relation import statement_key
from projections.base import Record
from projections.claim_page import apply, derive
from projections.page_model import PAGE, ClaimPage
from projections.sql import chunks, upsert
from projections.tables import RELATION_COLUMNS, claim_pages

CACHE_PAGES = 20_000


class ClaimPagesProjection:
    """Folds every event into its claim's page; keeps recently touched pages in memory between batches.

    ``write_behind`` (a rebuild's workers only): a page is written when it leaves the cache or at
    ``flush``, not after every batch that touches it, so a page is serialized and written about once
    however its events are spread over the log. The tables then lag the checkpoint until ``flush``,
    so such a fold cannot resume after a failed batch: it must start again (``forget`` says so).
    """

    name = "claim_pages"
    version = 2  # 2: standing and the scorecard rules (projections/scorecard.py, RULES_VERSION 1)
    tables = (claim_pages,)

    def __init__(self, *, write_behind: bool = False) -> None:
        self._cache: OrderedDict[str, ClaimPage] = OrderedDict()
        self._write_behind = write_behind
        self._dirty: set[str] = set()

    def apply_batch(self, conn: Connection, records: Sequence[Record]) -> None:
        """Load the touched pages, fold the batch into them and write them back in one upsert."""
        pages = self._load(conn, list(dict.fromkeys(r.event.claim_id for r in records)))
        for record in records:
            claim_id = record.event.claim_id
            pages[claim_id] = apply(pages.get(claim_id), record.event, record.seq, record.at)
        if not self._write_behind:
            upsert(conn, claim_pages, [page_row(derive(p)) for p in pages.values() if p is not None])
        evicted = []
        for claim_id, page in pages.items():
            if page is not None:
                evicted.extend(self._remember(claim_id, page))
                self._dirty.add(claim_id)
        if self._write_behind:
            upsert(conn, claim_pages, [page_row(derive(p)) for p in evicted])
        else:
            self._dirty.clear()

    def flush(self, conn: Connection) -> None:
        """Write every page folded since it was last written (write-behind)."""
        upsert(conn, claim_pages, [page_row(derive(self._cache[c])) for c in sorted(self._dirty) if c in self._cache])
        self._dirty.clear()

    def forget(self) -> None:
        """Drop cached pages (the batch that changed them rolled back)."""
        if self._write_behind and self._dirty:
            raise RuntimeError("a write-behind fold lost pages it had not written: start the rebuild again")
        self._cache.clear()

    def _load(self, conn: Connection, claim_ids: list[str]) -> dict[str, ClaimPage | None]:
        pages: dict[str, ClaimPage | None] = {}
        missing = []
        for claim_id in claim_ids:
            cached = self._cache.get(claim_id)
            if cached is None:
                missing.append(claim_id)
            pages[claim_id] = cached
        for chunk in chunks(missing):
            query = select(claim_pages.c.claim_id, claim_pages.c.doc).where(claim_pages.c.claim_id.in_(chunk))
            for claim_id, doc in conn.execute(query):
                pages[claim_id] = PAGE.validate_json(doc)
        return pages

    def _remember(self, claim_id: str, page: ClaimPage) -> list[ClaimPage]:
        """Keep the page; returns the dirty pages this pushed out of the cache (write-behind writes them)."""
        self._cache[claim_id] = page
        self._cache.move_to_end(claim_id)
        evicted = []
        while len(self._cache) > CACHE_PAGES:
            old_id, old_page = self._cache.popitem(last=False)
            if old_id in self._dirty:
                self._dirty.discard(old_id)
                evicted.append(old_page)
        return evicted


def page_row(page: ClaimPage) -> dict:
    """The claim_pages row for a page."""
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
        "doc": PAGE.dump_json(page).decode(),
    }
