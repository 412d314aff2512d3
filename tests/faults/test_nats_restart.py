"""SIGKILL nats-server while producers append with retries, and start it again on the same port and store.

Afterwards every acknowledged event is in the log exactly once, at the sequence its acknowledgement
named; no event id is stored twice; every atomic append is there whole; the hash chains hold; and the
projector, running in its own process throughout, catches up by itself to tables equal to a clean replay.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter, deque
from dataclasses import dataclass, field

import nats.errors
import pytest

from services.audit.verify import Report, check_log
from services.log import (
    ClaimLog,
    ConflictError,
    LogError,
    PublishError,
    StoredEvent,
    append,
    connect,
)
from services.runtime.embedded import EmbeddedNats
from tests.builders.workload import claim_events
from tests.faults.conftest import sqlite_url
from tests.faults.harness import (
    CleanReplay,
    checksums,
    log_spec,
    migrated,
    start_projector,
    stop,
    wait_for_checkpoint,
)
from tests.waiting import until

PRODUCERS = 4
CLAIMS_PER_PRODUCER = 30
EVENTS_PER_CLAIM = 200  # more than they get through: they stop when the faults are over
NATS_KILLS = 3
FIRST_APPEND = 3  # a claim's first append is an atomic batch: the draft and two sources
APPEND_TIMEOUT = 1.5  # how long an append waits for its acknowledgement before it is sent again


@dataclass
class Produced:
    """What the producers were told was stored: each append's event ids and the sequences acknowledged."""

    appends: list[tuple[list[str], int, int]] = field(
        default_factory=list
    )  # (event ids, first seq, last seq)
    retries: int = 0
    duplicates: int = 0  # acknowledgements that said a retry was already stored
    errors: Counter[str] = field(default_factory=Counter)
    in_flight: int = 0  # appends sent and not yet answered


async def append_until_acknowledged(
    nc, claim_id: str, events, head: tuple[int, str | None], produced: Produced
):
    """Append, and on any failure send the very same events again (same ids, same expected sequence)."""
    delay = 0.05
    while True:
        produced.in_flight += 1
        try:
            return await append(
                nc, "CLAIMS", claim_id, events, expected_seq=head[0], prev_hash=head[1], timeout=APPEND_TIMEOUT, layout=log_spec().layout
            )
        except ConflictError:
            raise  # only a genuine second writer conflicts: a retry of our own append is reported as a duplicate
        except (PublishError, LogError, nats.errors.Error, TimeoutError, OSError) as error:
            produced.retries += 1
            produced.errors[type(error).__name__] += 1
        finally:
            produced.in_flight -= 1
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def produce(url: str, first_claim: int, stop: asyncio.Event, produced: Produced) -> None:
    """Append the claims' events one at a time, round robin over the claims, until stopped or done."""
    nc = await connect(url, name=f"faults-producer-{first_claim}")
    rng = random.Random(first_claim)
    pending = {
        f"CLM-{n:07d}": deque(claim_events(n, EVENTS_PER_CLAIM, rng))
        for n in range(first_claim, first_claim + CLAIMS_PER_PRODUCER)
    }
    heads: dict[str, tuple[int, str | None]] = dict.fromkeys(pending, (0, None))
    try:
        while pending and not stop.is_set():
            for claim_id in list(pending):
                queue = pending[claim_id]
                events = [queue.popleft() for _ in range(FIRST_APPEND if heads[claim_id][0] == 0 else 1)]
                appended = await append_until_acknowledged(nc, claim_id, events, heads[claim_id], produced)
                produced.appends.append(([e.event_id for e in events], appended.first_seq, appended.last_seq))
                produced.duplicates += appended.duplicate
                heads[claim_id] = (appended.last_seq, appended.last_hash)
                if not queue:
                    del pending[claim_id]
                await asyncio.sleep(0.002)  # pace the appends so the kills land among them
    finally:
        await nc.close()


async def whole_log(claim_log: ClaimLog) -> list[StoredEvent]:
    stored: list[StoredEvent] = []
    while page := await claim_log.read_log(after_seq=stored[-1].seq if stored else 0, limit=1000):
        stored.extend(page)
    return stored


def kill(server: EmbeddedNats) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()


@pytest.mark.slow
@pytest.mark.timeout(150)
async def test_after_nats_server_is_killed_mid_stream_every_acknowledged_event_is_in_the_log_once_and_projected(
    tmp_path, fault_report
):
    server = EmbeddedNats(tmp_path / "nats", sync="always")
    admin_url = server.start()
    server.port = int(server.url.rsplit(":", 1)[1])  # restarts listen where every client reconnects
    nc = await connect(admin_url, name="faults-checker")
    claim_log = ClaimLog(nc, log_spec())
    await claim_log.ensure()
    database = sqlite_url(tmp_path, "live.sqlite3")
    engine, clean_engine = migrated(database), migrated(sqlite_url(tmp_path, "clean.sqlite3"))
    projector = start_projector(server.url_for("projector"), database, log_to=tmp_path / "projector.log")
    produced, stop_producing = Produced(), asyncio.Event()
    writer_url = server.url_for("writer")
    producers = [
        asyncio.create_task(produce(writer_url, 1 + p * CLAIMS_PER_PRODUCER, stop_producing, produced))
        for p in range(PRODUCERS)
    ]
    rng = random.Random(3)
    outages = []
    try:
        for _ in range(NATS_KILLS):
            await asyncio.sleep(rng.uniform(1.0, 2.0))  # the fault: a kill at a random moment of the writing
            assert not any(p.done() for p in producers), "the producers finished before every kill"
            async with asyncio.timeout(10):  # the kill lands on an append waiting for its answer
                while produced.in_flight == 0:
                    await asyncio.sleep(0.001)
            acknowledged = len(produced.appends)
            kill(server)
            # Down for longer than an append waits: every producer's append pending meanwhile times out and
            # is sent again, whether or not the server took it before the kill (one still in the client's
            # buffer would otherwise go out on reconnect and be answered in time, and the kill miss).
            down = rng.uniform(APPEND_TIMEOUT + 0.2, APPEND_TIMEOUT + 1.0)
            await asyncio.sleep(down)  # the fault: the server down this long
            started = time.monotonic()
            await asyncio.to_thread(server.start)
            outages.append((acknowledged, down, time.monotonic() - started))
        restarted = len(produced.appends)  # the producers go on against the restarted server
        await until(lambda: len(produced.appends) >= restarted + 10, what="appends acknowledged after the last restart", timeout=30)
        stop_producing.set()
        async with asyncio.timeout(60):
            await asyncio.gather(*producers)
        fault_report(
            f"injected: {NATS_KILLS} SIGKILLs of nats-server (sync_interval always) while {PRODUCERS} producers appended "
            "with retries, each restarted on the same port and store: "
            + ", ".join(
                f"after {n:,} acknowledged appends, down {d:.1f}s + {s:.1f}s to start" for n, d, s in outages
            )
        )
        fault_report(
            f"producers: {len(produced.appends):,} appends acknowledged, {produced.retries} retries "
            f"({dict(produced.errors)}), {produced.duplicates} acknowledged as already stored"
        )
        assert produced.retries > 0, "no append failed: the kills missed the producers"

        stored = await whole_log(claim_log)
        head = await claim_log.head()
        ids = [s.event.event_id for s in stored]
        assert [s.seq for s in stored] == list(range(1, head + 1)), "the log has gaps"
        repeated = [i for i, n in Counter(ids).items() if n > 1]
        assert not repeated, f"{len(repeated)} event ids stored more than once, e.g. {repeated[:3]}"
        at = {s.seq: s.event.event_id for s in stored}
        for event_ids, first, last in produced.appends:
            assert [at.get(seq) for seq in range(first, last + 1)] == event_ids, (
                f"append at {first}-{last} is not there"
            )
        acknowledged = {i for event_ids, _, _ in produced.appends for i in event_ids}
        assert set(ids) == acknowledged, (
            f"{len(set(ids) - acknowledged)} events in the log were never acknowledged"
        )
        report = Report()
        await check_log(claim_log, report, head=head)
        assert report.ok, f"verify found {dict(report.counts)}: {report.findings[:3]}"
        batches = sum(len(e) > 1 for e, _, _ in produced.appends)
        fault_report(
            f"checked the log: {len(stored):,} events, each acknowledged one exactly once at its acknowledged sequence, "
            f"no id twice, {batches} atomic appends whole, no gap, {report.claims} hash chains intact"
        )

        await wait_for_checkpoint(engine, beyond=head - 1, timeout=60, process=projector)
        assert projector.poll() is None
        clean = CleanReplay(claim_log, clean_engine, name="clean-replay")
        assert checksums(engine) == await clean.to(head), "the projector's tables differ from a clean replay"
        fault_report(
            f"checked the projector (one process, never restarted): caught up to {head:,} by itself, "
            "table checksums equal a clean replay"
        )
    finally:
        stop_producing.set()
        stop(projector)
        await nc.close()
        engine.dispose()
        clean_engine.dispose()
        server.stop()
