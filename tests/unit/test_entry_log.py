"""The auditor's replay reads the mirror's entries as the projector asks for them: a log of a million entries
is folded a batch at a time, never held in memory whole, and a restart reads again from where it asks."""

from __future__ import annotations

from collections.abc import Iterator

from services.auditor.replay import EntryLog
from services.log.consumer import Delivery
from services.log.signing import Attribution


def source(count: int, pulled: list[int]):
    def after(after_seq: int) -> Iterator[Delivery]:
        for seq in range(after_seq + 1, count + 1):
            pulled.append(seq)
            yield Delivery(seq, 0, f"claims.C{seq}.ClaimDrafted", b"{}", "", None)
    return after


async def test_entries_are_read_a_batch_at_a_time_and_again_from_where_a_restart_asks():
    pulled: list[int] = []
    log = EntryLog(source(1_000_000, pulled), Attribution({}, None)).consumer("audit", max_batch=100)
    await log.start(0)
    first = await log.next_batch()
    assert [d.seq for d in first] == list(range(1, 101)) and len(pulled) == 100  # not the million
    await log.start(50)  # the projector starts again after its checkpoint
    assert [d.seq for d in await log.next_batch()][:3] == [51, 52, 53]


async def test_deliveries_in_memory_are_read_from_their_sequence():
    held = [Delivery(seq, 0, f"claims.C{seq}.ClaimDrafted", b"{}", "", None) for seq in range(1, 11)]
    log = EntryLog(held, Attribution({}, None)).consumer("fold", max_batch=4)
    await log.start(6)
    assert [d.seq for d in await log.next_batch()] == [7, 8, 9, 10]
    assert await log.next_batch() == []
