"""SIGKILL the projector process ten times while it replays a log of 100,000 events.

After each kill the tables it left are compared with a clean replay stopped at exactly the checkpoint
the killed process had committed; after the last restart it finishes the log and the tables equal a
clean replay of the whole log.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

import pytest
from sqlalchemy import Engine

from tests.faults.conftest import PostgresTarget, PublishedLog, sqlite_url
from tests.faults.harness import (
    CleanReplay,
    checkpoint,
    checksums,
    migrated,
    sigkill,
    start_projector,
    stop,
    wait_for_checkpoint,
)

KILLS = 10


async def kill_during_replay(
    log: PublishedLog,
    url: str,
    engine: Engine,
    clean: CleanReplay,
    report: Callable[[str], None],
    *,
    name: str,
    seed: int,
    kills: int = KILLS,
) -> None:
    """Kill the projector at random moments spread over the replay, checking the tables after each kill and at the end."""
    rng = random.Random(seed)
    report(f"log: {log.head:,} events over {log.claims:,} claims (published in {log.seconds:.1f}s)")
    # Random points of the replay; each incarnation must pass its point (so it committed something new),
    # then lives a random while longer (up to 0.15 s), which may end in the middle of a transaction. The
    # projector applies 10,000 to 30,000 events a second here: the last point leaves room for that while.
    targets = sorted(int(rng.uniform(0.02, 0.85) * log.head) for _ in range(kills))
    killed: list[tuple[int, float]] = []  # (checkpoint left behind, seconds after that process started)
    projector = start_projector(log.url, url, name=name)
    started = time.monotonic()
    try:
        for target in targets:
            previous = killed[-1][0] if killed else 0
            await wait_for_checkpoint(engine, beyond=max(target, previous), timeout=90, process=projector)
            await asyncio.sleep(rng.uniform(0.0, 0.15))  # the fault: a kill at a random point of a batch
            sigkill(projector)
            left = checkpoint(engine)
            killed.append((left, time.monotonic() - started))
            survived = checksums(engine)
            # The clean replay to the same checkpoint first: were the next incarnation started meanwhile,
            # it could be far past its point by the time it is waited for, and the kills bunch up at the end.
            assert survived == await clean.to(left), f"after the kill at checkpoint {left}, tables differ"
            projector = start_projector(log.url, url, name=name)
            started = time.monotonic()
        expected, _ = await asyncio.gather(
            clean.to(log.head),
            wait_for_checkpoint(engine, beyond=log.head - 1, timeout=150, process=projector),
        )
    finally:
        stop(projector)
    report(
        f"injected: {kills} SIGKILLs of `claimlog projector`, each a random moment after it passed a random point "
        "of the replay, at checkpoints "
        + ", ".join(f"{seq:,} ({after:.1f}s after its start)" for seq, after in killed)
    )
    assert all(0 < seq < log.head for seq, _ in killed), f"a kill did not land mid-replay: {killed}"
    report(
        f"checked after each kill: {kills} times, the tables left behind equal a clean replay stopped at that checkpoint"
    )
    assert checkpoint(engine) == log.head
    survived = checksums(engine)
    assert survived == expected, "after the last restart the tables differ from a clean replay"
    report(
        f"checked at the end: checkpoint {log.head:,} = head; {len(survived)} table checksums equal a clean replay"
    )


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_projector_sigkilled_ten_times_during_a_replay_of_100000_events_into_sqlite_ends_equal_to_a_clean_replay(
    replay_log: PublishedLog, tmp_path, fault_report
):
    url = sqlite_url(tmp_path, "killed.sqlite3")
    engine = migrated(url)
    try:
        await kill_during_replay(
            replay_log, url, engine, replay_log.clean, fault_report, name="killed-sqlite", seed=7
        )
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_a_projector_sigkilled_three_times_during_a_replay_of_20000_events_into_postgresql_ends_equal_to_a_clean_replay(
    small_replay_log: PublishedLog, postgres_target: PostgresTarget, fault_report
):
    await kill_during_replay(
        small_replay_log,
        postgres_target.url,
        postgres_target.engine,
        postgres_target.clean,
        fault_report,
        name="killed-postgres",
        seed=11,
        kills=3,
    )
