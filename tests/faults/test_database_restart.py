"""Stop the projector's PostgreSQL mid-ingest (a fast shutdown, then an immediate one) and start it again.

The projector process, never restarted, retries with backoff while the database is away, resumes at
the checkpoint the database kept, and ends with tables equal to a clean replay: nothing skipped.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest

from services.log import ClaimLog, connect
from services.runtime.embedded import EmbeddedNats
from tests.faults.harness import (
    CleanReplay,
    checkpoint,
    checksums,
    log_spec,
    migrated,
    publish_workload,
    start_projector,
    stop,
    wait_for_checkpoint,
)
from tests.faults.private_postgres import PrivatePostgres

BACKLOG_CLAIMS = 1_000  # x 10 events, published before the projector starts
TAIL_CLAIMS = 300  # x 10 events, published while the database is down
OUTAGE_SECONDS = 3.0


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.remove()


async def outage(server: PrivatePostgres, mode: str, *, meanwhile=None) -> float:
    """Stop the database, do ``meanwhile`` (a coroutine), start it again once OUTAGE_SECONDS have passed."""
    stopped = time.monotonic()
    await asyncio.to_thread(server.stop, mode)
    if meanwhile is not None:
        await meanwhile
    await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - stopped)))  # the fault is an outage this long
    await asyncio.to_thread(server.start)
    return time.monotonic() - stopped


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_a_projector_whose_postgresql_restarts_mid_ingest_resumes_at_its_checkpoint_and_skips_nothing(
    private_postgres: PrivatePostgres, tmp_path, fault_report
):
    nats = EmbeddedNats(tmp_path / "nats", sync="30s")
    nats_url = nats.start()
    live, clean_url = private_postgres.create_database("live"), private_postgres.create_database("clean")
    engine, clean_engine = migrated(live), migrated(clean_url)
    projector_log = tmp_path / "projector.log"
    projector = None
    nc = await connect(nats_url, name="faults-checker")
    try:
        backlog = await publish_workload(nats_url, claims=BACKLOG_CLAIMS, per_claim=10)
        projector = start_projector(nats_url, live, batch=500, log_to=projector_log)
        stops = []
        for mode, publish_meanwhile in (("fast", True), ("immediate", False)):
            beyond = (stops[-1][2] if stops else 0) + 2_000
            at = await wait_for_checkpoint(engine, beyond=beyond, timeout=60, process=projector)
            meanwhile = None
            if publish_meanwhile:
                meanwhile = publish_workload(nats_url, claims=TAIL_CLAIMS, per_claim=10, first=BACKLOG_CLAIMS)
            down = await outage(private_postgres, mode, meanwhile=meanwhile)
            resumed = checkpoint(engine)  # what the database kept: the projector goes on from here
            assert projector.poll() is None, "the projector exited while its database was down"
            stops.append((mode, at, resumed, down))
        head = await ClaimLog(nc, log_spec()).head()
        assert all(resumed < head for _, _, resumed, _ in stops), f"an outage came after the ingest: {stops}"
        clean = CleanReplay(ClaimLog(nc, log_spec()), clean_engine, name="clean-replay")
        expected, _ = await asyncio.gather(
            clean.to(head), wait_for_checkpoint(engine, beyond=head - 1, timeout=90, process=projector)
        )
        retries = [float(d) for d in re.findall(r"retrying in ([0-9.]+)s", projector_log.read_text())]
        fault_report(
            f"log: {backlog:,} events published before the projector started, {head - backlog:,} more while the "
            f"database was down; projector batches of 500, PostgreSQL {private_postgres.bindir.parent.name} of the "
            f"test's own on port {private_postgres.port}"
        )
        fault_report(
            "injected: "
            + ", ".join(
                f"pg_ctl stop -m {mode} at checkpoint >= {at:,} (kept {resumed:,}), down {down:.1f}s"
                for mode, at, resumed, down in stops
            )
        )
        fault_report(
            f"projector retried {len(retries)} times, waiting {', '.join(f'{d:g}s' for d in retries)}"
        )
        assert len(retries) >= len(stops), "the projector did not retry through the outages"
        assert max(retries) > min(retries), "the projector's retries did not back off"
        assert projector.poll() is None
        survived = checksums(engine)
        assert survived == expected, "after the restarts the tables differ from a clean replay"
        fault_report(
            f"checked: the same projector process caught up to {head:,}; {len(survived)} table checksums "
            "equal a clean replay"
        )
    finally:
        if projector is not None:
            stop(projector)
        await nc.close()
        engine.dispose()
        clean_engine.dispose()
        nats.stop()
