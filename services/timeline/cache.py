"""Claims' stored events and folded past pages, kept in memory by the read API.

The log is append-only: once a claim's events through some sequence have been read, they stay exactly
what they are. So a claim's events are read once (then only the newer ones), each decoded once, and a
page folded as of a point is kept under the last event it includes.
"""

from __future__ import annotations

from collections import OrderedDict

from services.log import ClaimLog, StoredEvent

CLAIMS = 1024  # claims whose events are kept
PAGES = 1024  # past pages kept, as JSON


class ClaimEvents:
    """Each recently read claim's events, complete through the last sequence read."""

    def __init__(self, *, claims: int = CLAIMS, pages: int = PAGES) -> None:
        self._claims = claims
        self._known: OrderedDict[str, list[StoredEvent]] = OrderedDict()
        self._pages: OrderedDict[tuple[str, int], bytes | None] = OrderedDict()
        self._page_limit = pages

    async def read(self, claim_log: ClaimLog, claim_id: str, *, up_to_seq: int | None = None) -> list[StoredEvent]:
        """The claim's events (up to ``up_to_seq`` at least, when given), reading only what is not known yet."""
        known = self._known.get(claim_id, [])
        through = known[-1].seq if known else 0
        if up_to_seq is None or up_to_seq > through:
            newer = await claim_log.read_claim(claim_id, after_seq=through, up_to_seq=up_to_seq)
            known = self._known.get(claim_id, [])  # another read may have added some meanwhile
            last = known[-1].seq if known else 0
            known = known + [stored for stored in newer if stored.seq > last]
        self._known[claim_id] = known
        self._known.move_to_end(claim_id)
        while len(self._known) > self._claims:
            self._known.popitem(last=False)
        return known

    def page(self, claim_id: str, last_seq: int) -> bytes | None:
        """The page folded through ``last_seq`` (the claim's last event then), if kept."""
        return self._pages.get((claim_id, last_seq))

    def keep_page(self, claim_id: str, last_seq: int, doc: bytes) -> None:
        """Keep a folded page under the last event it includes."""
        self._pages[(claim_id, last_seq)] = doc
        while len(self._pages) > self._page_limit:
            self._pages.popitem(last=False)
