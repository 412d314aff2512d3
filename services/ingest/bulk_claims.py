"""The claims a bulk ingestion is working on: a bounded cache of their states, read from the log on a miss.

What is kept per claim: its decision state (``ClaimState``, which grows with the claim's own events,
not with the file), the sequence of its last acknowledged event, how many of its events wait for an
acknowledgement, and the counts of its identical lines (for derived event ids). A claim with events
waiting is never evicted; the others leave least recently used first, and come back by reading the
claim again and taking back the counts of its identical lines, kept off the heap meanwhile
(``bulk_copies``). Memory is bounded by ``capacity`` claims plus those of the batches in flight.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from services.admission import Gate, gate_for
from services.commands.claim_state import ClaimState, claim_state
from services.ingest.bulk_copies import EvictedCopies
from services.log import ClaimLog

DEFAULT_CAPACITY = 20_000
READS_AT_ONCE = 256


@dataclass(slots=True)
class ClaimSlot:
    """One claim as the ingestion sees it: the state decisions look at (acknowledged and pending events)."""

    state: ClaimState
    acked_seq: int  # the sequence of its last acknowledged event (what its next batch expects)
    unacked: int = 0  # its events decided but not yet acknowledged
    copies: Counter[int] = field(default_factory=Counter)
    stale: bool = False  # its state may be wrong (a refused batch): read it again before use
    presumed: bool = False  # taken to be new without asking the log, not yet confirmed by an acknowledgement


class ClaimCache:
    """Least recently used claims, at most ``capacity`` of them once their pending events are acknowledged."""

    def __init__(self, log: ClaimLog, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._log, self._capacity = log, capacity
        self._slots: OrderedDict[str, ClaimSlot] = OrderedDict()
        self._touched: set[str] | None = None  # claims read, held or evicted while a prefetch runs
        self._evicted = EvictedCopies()  # the counts of identical lines of the claims let go

    def peek(self, claim_id: str) -> ClaimSlot | None:
        """The claim's slot if it is held and usable as it is (no read needed), else None."""
        slot = self._slots.get(claim_id)
        if slot is None or slot.stale:
            return None
        self._slots.move_to_end(claim_id)
        return slot

    async def get(self, claim_id: str) -> ClaimSlot:
        """The claim's slot, read from the log when it is not held."""
        slot = self._slots.get(claim_id)
        if slot is not None and not slot.stale:
            self._slots.move_to_end(claim_id)
            return slot
        self._touch(claim_id)
        stored = await self._log.read_claim(claim_id)
        state = claim_state(claim_id, stored, await gate_for(self._log, (item.signature for item in stored)))
        copies = slot.copies if slot else self._evicted.take([claim_id]).get(claim_id, Counter())
        fresh = ClaimSlot(state, state.head_seq, copies=copies)
        self._slots[claim_id] = fresh
        self._slots.move_to_end(claim_id)
        self._evict(keep=claim_id)
        return fresh

    async def prefetch(self, claim_ids: set[str], *, new: set[str] = frozenset()) -> None:  # noqa: B006 - never changed
        """Read the claims not held, many at once (a file's next lines name them before they are decided);
        those in ``new`` are taken to have no events without asking.

        It runs while other lines are decided: a claim that is read, held or evicted meanwhile keeps
        what that left (its state may be newer than this read). A claim held but stale is read again
        (keeping its counts of identical lines).
        """
        missing = [c for c in claim_ids if (slot := self._slots.get(c)) is None or slot.stale]
        if not missing:
            return
        kept = self._evicted.take([c for c in missing if c not in self._slots])
        touched = self._touched = set()
        try:
            asked = [c for c in missing if c not in new]
            existing = await self._log.claims_with_events(asked) if asked else set()
            for claim_id in missing:
                if claim_id not in existing:
                    self._put(claim_id, [], touched, kept, presumed=claim_id in new)  # nothing to read: no events yet
            reads = [c for c in missing if c in existing]
            for start in range(0, len(reads), READS_AT_ONCE):
                group = reads[start : start + READS_AT_ONCE]
                read = await asyncio.gather(*(self._log.read_claim(c) for c in group))
                gate = await gate_for(self._log, (item.signature for stored in read for item in stored))
                for claim_id, stored in zip(group, read, strict=True):
                    self._put(claim_id, stored, touched, kept, gate=gate)
        finally:
            self._touched = None
        self._evict(keep="")

    def _put(
        self, claim_id: str, stored: list, touched: set[str], kept: dict[str, Counter[int]], *, presumed: bool = False, gate: Gate | None = None
    ) -> None:
        slot = self._slots.get(claim_id)
        if claim_id in touched or (slot is not None and not slot.stale):
            return
        state = claim_state(claim_id, stored, gate)
        copies = slot.copies if slot else kept.get(claim_id, Counter())
        self._slots[claim_id] = ClaimSlot(state, state.head_seq, copies=copies, presumed=presumed)

    def drafted(self, claim_id: str) -> bool:
        """Whether the claim is held and drafted (a claim not held is taken to be not drafted)."""
        slot = self._slots.get(claim_id)
        return slot is not None and not slot.stale and slot.state.drafted

    def hold(self, claim_id: str, slot: ClaimSlot) -> None:
        """Keep a slot that has just got events waiting (reading other claims may have pushed it out)."""
        if claim_id not in self._slots:
            self._touch(claim_id)
            self._slots[claim_id] = slot

    def held(self, claim_id: str) -> ClaimSlot:
        """A slot known to be held (one with events waiting)."""
        return self._slots[claim_id]

    def presumed(self) -> set[str]:
        """The claims taken to be new that have no events waiting (whose taking nothing has confirmed)."""
        return {claim_id for claim_id, slot in self._slots.items() if slot.presumed and not slot.unacked and not slot.stale}

    def forget(self, claim_ids) -> None:
        """Mark claims whose held state may be wrong (a refused batch): the next use reads them again."""
        for claim_id in claim_ids:
            self._touch(claim_id)
            slot = self._slots.get(claim_id)
            if slot is not None:
                slot.stale, slot.unacked, slot.presumed = True, 0, False

    def close(self) -> None:
        """Let go of the counts kept for evicted claims (the run is over)."""
        self._evicted.close()

    def __len__(self) -> int:
        return len(self._slots)

    def _evict(self, *, keep: str) -> None:
        checked, evicted = 0, []
        while len(self._slots) > self._capacity and checked < len(self._slots):
            claim_id, slot = next(iter(self._slots.items()))
            if slot.unacked or claim_id == keep:
                self._slots.move_to_end(claim_id)  # waiting for its batch: keep it
                checked += 1
            else:
                del self._slots[claim_id]
                self._touch(claim_id)
                evicted.append((claim_id, slot.copies))
        self._evicted.keep(evicted)

    def _touch(self, claim_id: str) -> None:
        if self._touched is not None:
            self._touched.add(claim_id)  # a prefetch running meanwhile leaves it as it is
