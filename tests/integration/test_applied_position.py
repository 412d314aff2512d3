"""The registry-wide position on a log of 16 partitions most of which hold no event: every reader says
the same sequence, at or below which every event is applied, and a caught-up registry has no lag."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import Engine, select

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog
from services.projector import Projector
from services.read_api.guards import Guards
from services.rebuild.replay import rebuild_generation
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.builders import drafted, history
from tests.conftest import random_claim_id
from tests.integration.guarded_api import guarded_api, projection
from tests.integration.test_parking import cli
from tests.integration.test_read_your_writes_partitions import claims_in_two_partitions

NAMES = {p.name for p in build_projections()}


async def fold_every_partition(claim_log: ClaimLog, engine: Engine) -> int:
    """Fold the log as ``make run``'s one worker does (every partition, a checkpoint each); the head."""
    head = await claim_log.head()
    epochs = dict.fromkeys(range(claim_log.layout.partitions), 1)
    await Projector(claim_log, engine, build_projections(), name="worker", batch=50, epochs=epochs).run_until(head)
    return head


async def test_a_caught_up_registry_stands_at_the_head_whatever_its_empty_partitions_checkpoints(
    claim_log: ClaimLog, engine: Engine, nats_url: str, settings: Settings, generations: Generations
):
    layout = claim_log.layout
    assert layout.partitions == 16
    first, second = claims_in_two_partitions(claim_log)
    for claim in (first, second):
        await claim_log.append(claim, history(claim), expected_seq=0, prev_hash=None)
    head = await fold_every_partition(claim_log, engine)
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints.c.partition, checkpoints.c.last_seq).where(checkpoints.c.name == "claim_pages")).all()
    assert len(rows) == 16 and sorted(seq for _, seq in rows)[0] == 0  # partitions that hold no event stand at 0
    assert head > 3

    async for guarded in guarded_api(claim_log, engine, Guards(ready_max_lag_events=3)):
        http = guarded.api.http
        health = (await http.get("/health")).json()
        assert health["head"] == head and health["projections"] == dict.fromkeys(NAMES, head), health
        assert health["lag_events"] == dict.fromkeys(NAMES, 0)
        ready = await http.get("/health/ready")
        assert ready.status_code == 200, ready.text
        assert ready.json()["projections"]["claim_pages"] == {"last_seq": head, "lag_events": 0}
        metrics = await guarded.metrics()
        for name in NAMES:
            assert metrics[("claimlog_projection_last_applied_seq", projection(name))] == head
            assert metrics[("claimlog_projection_lag_events", projection(name))] == 0
            assert metrics[("claimlog_projection_lag_seconds", projection(name))] == 0
        assert (await http.get("/scorecard")).json()["applied_seq"] == head
        assert f"As of log sequence {head} " in (await http.get("/pages/scorecard")).text

        # One event more in the first claim's partition, not folded: the position stands just before it.
        later = random_claim_id()
        while layout.partition_of(later) != layout.partition_of(first):
            later = random_claim_id()
        await claim_log.append(later, [drafted(later)], expected_seq=0, prev_hash=None)
        behind = (await http.get("/health")).json()
        assert behind["head"] == head + 1 and behind["projections"] == dict.fromkeys(NAMES, head)
        assert behind["lag_events"] == dict.fromkeys(NAMES, 1)
        assert (await http.get("/health/ready")).status_code == 200  # one behind, within the limit of 3

    status = await asyncio.to_thread(cli, engine, nats_url, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["projections"]["claim_pages"] == {"last_seq": head, "lag_events": 1}
    head = await fold_every_partition(claim_log, engine)
    shown = await asyncio.to_thread(cli, engine, nats_url, "status")
    assert shown.returncode == 0 and f"projections (log head {head};" in shown.stdout, shown.stdout

    rebuilt = await rebuild_generation(settings, generations, switch=False, diff=True)
    assert rebuilt.diff is not None and rebuilt.diff.empty, rebuilt.diff
    assert (rebuilt.diff.old_seq, rebuilt.diff.new_seq) == (head, head)


async def test_an_api_without_the_log_says_the_position_of_a_partitioned_registry_is_unknown(claim_log: ClaimLog, engine: Engine):
    claim = random_claim_id()
    await claim_log.append(claim, history(claim), expected_seq=0, prev_hash=None)
    await fold_every_partition(claim_log, engine)

    async for guarded in guarded_api(None, engine, Guards(ready_max_lag_events=3)):
        http = guarded.api.http
        health = (await http.get("/health")).json()
        assert health["head"] is None and "lag_events" not in health
        assert health["projections"] == dict.fromkeys(NAMES) and "which partitions hold events" in health["unknown"]
        ready = await http.get("/health/ready")
        assert ready.status_code == 200 and ready.json()["lag_checked"] is False  # it serves what it has
        assert ready.json()["projections"]["claim_pages"] == {"last_seq": None, "lag_events": None}
        assert (await http.get("/scorecard")).json()["applied_seq"] is None
        assert "As of a log sequence this server cannot tell" in (await http.get("/pages/scorecard")).text
        metrics = await guarded.metrics()
        assert metrics[("claimlog_log_head_known", ())] == 0
        assert not any(name == "claimlog_projection_last_applied_seq" for name, _ in metrics)
