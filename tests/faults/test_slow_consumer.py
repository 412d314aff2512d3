"""A projector slowed down until the server holds thousands of delivered, unacknowledged events for it.

Every batch first sleeps (in the writer's thread, as a slow projection would) for
a while; the server's view of the consumer is sampled (``num_ack_pending``, ``num_pending``) and so
is the process's resident memory. Nothing is lost (the tables equal a clean replay), and memory stays
bounded: buffering the backlog would cost far more than the bound.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from services.log import ClaimLog
from tests.faults.conftest import PublishedLog, sqlite_url
from tests.faults.harness import (
    checkpoint,
    checksums,
    migrated,
    rss_mb,
    start_projector,
    stop,
    wait_for_checkpoint,
)

BATCH = 2000  # the projector asks for two batches ahead and lets at most four be unacknowledged
SLOW_SECONDS = 8.0
SLOW = f"1.0:{SLOW_SECONDS}"  # 1 s before each batch, for the first 8 s of the process
# While slow, the projector has applied little and holds few pages: growth beyond this would be the
# backlog buffered in the process (100,000 events of about 1 KB, several hundred MB as Python objects).
RSS_GROWTH_BOUND_MB = 60


async def sample(claim_log: ClaimLog, name: str, pid: int, samples: list, stop: asyncio.Event) -> None:
    """Every 0.2 s: (seconds, the server's num_ack_pending and num_pending for the consumer, RSS in MB)."""
    jsm = claim_log.nc.jetstream()
    started = time.monotonic()
    while not stop.is_set():
        try:
            info = await jsm.consumer_info(claim_log.stream, name)
            samples.append((time.monotonic() - started, info.num_ack_pending, info.num_pending, rss_mb(pid)))
        except Exception:  # noqa: BLE001 - the consumer is recreated when the projector starts
            pass
        await asyncio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_consumer_slowed_until_thousands_are_unacknowledged_loses_nothing_and_stays_bounded_in_memory(
    replay_log: PublishedLog, tmp_path, fault_report
):
    claim_log = replay_log.clean.claim_log
    url = sqlite_url(tmp_path, "slow.sqlite3")
    engine = migrated(url)
    name = "slow-projector"
    projector = start_projector(replay_log.url, url, name=name, batch=BATCH, slow=SLOW)
    samples: list[tuple[float, int, int, float]] = []
    done = asyncio.Event()
    sampler = asyncio.create_task(sample(claim_log, name, projector.pid, samples, done))
    try:
        await wait_for_checkpoint(engine, beyond=0, timeout=60, process=projector)
        slow_until = checkpoint(engine)
        baseline = rss_mb(projector.pid)  # after the first commit: code loaded, connections open
        expected, _ = await asyncio.gather(
            replay_log.clean.to(replay_log.head),
            wait_for_checkpoint(engine, beyond=replay_log.head - 1, timeout=120, process=projector),
        )
    finally:
        done.set()
        await sampler
        stop(projector)
    first = await claim_log.read_log(after_seq=0, limit=1000)
    event_bytes = sum(len(stored.data) for stored in first) / len(first)
    slow = [s for s in samples if s[0] <= SLOW_SECONDS + 0.5]
    peak_unacked = max(s[1] for s in slow)
    pending_then = max(s[2] for s in slow)
    slow_rss = max(s[3] for s in slow)
    peak_rss = max(s[3] for s in samples)
    fault_report(
        f"injected: `claimlog projector` (batches of {BATCH}) sleeping 1 s before each batch for its first {SLOW_SECONDS:g} s, "
        f"on a log of {replay_log.head:,} events"
    )
    fault_report(
        f"while slow, server side ({len(slow)} samples of consumer info): up to {peak_unacked:,} delivered and unacknowledged "
        f"(num_ack_pending), up to {pending_then:,} not yet delivered (num_pending)"
    )
    fault_report(
        f"projector memory: {baseline:.0f} MB after its first commit (checkpoint {slow_until:,}), peak {slow_rss:.0f} MB "
        f"while slow (bound: +{RSS_GROWTH_BOUND_MB} MB; the undelivered backlog's stored bytes alone are "
        f"{pending_then * event_bytes / 2**20:.0f} MB, {event_bytes:.0f} bytes an event); peak {peak_rss:.0f} MB over "
        "the whole replay, its claim-page cache (up to 20,000 pages) then holding every claim"
    )
    assert peak_unacked >= 2000, f"the server never held thousands of unacknowledged events ({peak_unacked})"
    assert slow_rss - baseline < RSS_GROWTH_BOUND_MB, f"memory grew from {baseline:.0f} to {slow_rss:.0f} MB"
    survived = checksums(engine)
    assert checkpoint(engine) == replay_log.head
    assert survived == expected, "the slowed projector's tables differ from a clean replay"
    fault_report(
        f"checked: caught up to {replay_log.head:,} once fast again; {len(survived)} table checksums equal a clean replay"
    )
    engine.dispose()
