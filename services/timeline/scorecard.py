"""Every claim's scorecard row, and every claim's listing summary, as of a past point: the whole log folded in
order, in memory, by the projector's code.

The live scorecard groups the claim rows the projector wrote; this groups the pages folded up to a sequence
(or a stored time) the same way (``queries.scorecard_rows``), and the read API tallies both with one function.
The past listing is the same summaries the projector writes (``claim_summary``), filtered and ordered by the
read API. The past never changes, so the rows of each sequence are kept, and the fold itself is kept where it
stopped: a later point continues from there instead of starting again from the first event.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from datetime import datetime

from projections.claim_page import apply, derive
from projections.claim_pages import page_row
from projections.page_model import ClaimPage
from services.admission import Admitted, Gate, InOrder, gate_for
from services.log import ClaimLog, StoredEvent
from services.timeline.as_of import AsOf

READ_PAGE = 1000  # events per read of the log
KEEP = 128  # sequences whose scorecard rows are kept
KEEP_SUMMARIES = 4  # sequences whose listing summaries (one per claim) are kept
GROUP = ("capability", "technique", "standing", "counts_toward_scorecard", "unreviewed_model_draft")


def scorecard_rows(pages: dict[str, ClaimPage], capability: str | None = None) -> list[dict]:
    """Active claims per capability, technique, standing and eligibility: the grouping of ``queries.scorecard_rows``."""
    groups: Counter[tuple] = Counter()
    for page in pages.values():
        status = derive(page).status
        if status.lifecycle != "active" or (capability is not None and page.capability != capability):
            continue
        groups[(page.capability, page.technique, status.standing, status.counts_toward_scorecard, status.unreviewed_model_draft)] += 1
    return [{**dict(zip(GROUP, key, strict=True)), "claims": claims} for key, claims in groups.items()]


def claim_summary(page: ClaimPage) -> dict:
    """The listing's columns of a page's claim_pages row (``listing_sql.SUMMARY_COLUMNS``), without its document."""
    return page_row(page, with_doc=False)


class RegistryHistory:
    """Folds the log forward to the points asked for, one at a time, and remembers each point's rows."""

    def __init__(self, *, keep: int = KEEP) -> None:
        self._lock = asyncio.Lock()
        self._keep = keep
        self._rows: OrderedDict[int, list[dict]] = OrderedDict()
        self._summaries: OrderedDict[int, list[dict]] = OrderedDict()
        self._times: dict[datetime, int] = {}  # times already resolved to the last sequence stored by then
        self._pages: dict[str, ClaimPage] = {}
        self._in_order = InOrder(Gate())  # the gate, and the event ids folded: an id per event, as the pages hold an entry per event
        self._seq = 0  # the fold has read the log through this sequence
        self._last_time: datetime | None = None  # store time of the last event folded

    async def rows(self, claim_log: ClaimLog, as_of: AsOf, capability: str | None = None) -> tuple[int, list[dict]]:
        """The log sequence the point stands for, and the scorecard rows of every claim (or one capability) then."""
        async with self._lock:
            seq = await self._resolve(claim_log, as_of, self._rows)
            rows = self._rows.get(seq)
            if rows is None:
                rows = self._remember(self._rows, seq, scorecard_rows(self._pages), self._keep)
            self._rows.move_to_end(seq)
        return seq, [row for row in rows if capability is None or row["capability"] == capability]

    async def summaries(self, claim_log: ClaimLog, as_of: AsOf) -> tuple[int, list[dict]]:
        """The log sequence the point stands for, and every claim's listing summary then (drafted by then)."""
        async with self._lock:
            seq = await self._resolve(claim_log, as_of, self._summaries)
            rows = self._summaries.get(seq)
            if rows is None:
                rows = [claim_summary(derive(page)) for page in self._pages.values()]
                rows = self._remember(self._summaries, seq, rows, KEEP_SUMMARIES)
            self._summaries.move_to_end(seq)
        return seq, rows

    async def _resolve(self, claim_log: ClaimLog, as_of: AsOf, kept: OrderedDict[int, list[dict]]) -> int:
        """The point's sequence, with the fold standing there unless ``kept`` already holds its rows."""
        if as_of.seq is not None:
            seq = min(as_of.seq, await claim_log.head())
            if seq not in kept:
                if self._seq > seq:
                    self._restart()
                await self._fold(claim_log, through=seq, stored_by=None)
                self._seq = seq
            return seq
        at = as_of.at
        assert at is not None
        if at in self._times and self._times[at] in kept:
            return self._times[at]
        if self._last_time is not None and self._last_time > at:
            self._restart()
        if await self._fold(claim_log, through=await claim_log.head(), stored_by=at):
            self._times[at] = self._seq  # a later event was seen: no event can still arrive stored by then
        return self._seq

    async def _fold(self, claim_log: ClaimLog, *, through: int, stored_by: datetime | None) -> bool:
        """Fold forward through ``through``; True when it stopped at an event stored after ``stored_by``."""
        while self._seq < through:
            batch = await claim_log.read_log(after_seq=self._seq, limit=min(READ_PAGE, through - self._seq))
            if not batch:
                return False
            self._in_order.gate = await gate_for(claim_log, (stored.signature for stored in batch))
            for stored in batch:
                if stored.seq > through:
                    return False
                if stored_by is not None and stored.stored_at > stored_by:
                    return True
                self._apply(stored)
        return False

    def _apply(self, stored: StoredEvent) -> None:
        self._seq, self._last_time = stored.seq, stored.stored_at
        verdict = self._in_order.admit(stored)
        if not isinstance(verdict, Admitted):
            return  # refused by the gate: skipped, as the projector skips it
        event = verdict.event
        page = apply(self._pages.get(event.claim_id), event, stored.seq, stored.stored_at)
        if page is not None:
            self._pages[event.claim_id] = page

    def _restart(self) -> None:
        self._pages, self._in_order, self._seq, self._last_time = {}, InOrder(Gate()), 0, None

    @staticmethod
    def _remember(kept: OrderedDict[int, list[dict]], seq: int, rows: list[dict], keep: int) -> list[dict]:
        kept[seq] = rows
        while len(kept) > keep:
            kept.popitem(last=False)
        return rows
