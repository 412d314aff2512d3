"""``GET /health`` and ``claimlog status`` list each projector worker with the partitions it holds, their
epochs and lag, and the partitions nobody holds: leases in a real NATS bucket, partition runners on
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import Engine

from services.log import ClaimLog
from services.projector.leases import Leases
from tests.builders import history
from tests.integration.guarded_api import guarded_api
from tests.integration.test_parking import cli
from tests.integration.test_read_your_writes_partitions import claims_in_two_partitions, fold_partition


async def test_health_and_status_show_each_worker_its_partitions_epochs_and_lag(claim_log: ClaimLog, engine: Engine, nats_url: str):
    layout = claim_log.layout
    folded, waiting = claims_in_two_partitions(claim_log)
    p_folded, p_waiting = layout.partition_of(folded), layout.partition_of(waiting)
    folded_last = (await claim_log.append(folded, history(folded), expected_seq=0, prev_hash=None)).last_seq
    waiting_appended = await claim_log.append(waiting, history(waiting), expected_seq=0, prev_hash=None)

    js = claim_log.nc.jetstream()
    first, second = await Leases.open(js, "first", ttl=60), await Leases.open(js, "second", ttl=60)
    for worker in (first, second):
        await worker.announce()
    lease, other = await first.take(p_folded), await second.take(p_waiting)
    assert lease is not None and other is not None
    await fold_partition(claim_log, engine, p_folded, folded_last, epoch=lease.epoch)
    idle = await Leases.open(js, "idle", ttl=60)
    await idle.announce()

    async for guarded in guarded_api(claim_log, engine):
        body = (await guarded.api.http.get("/health")).json()
    assert body["status"] == "ok" and body["head"] == waiting_appended.last_seq
    assert set(body["projections"]) == set(body["lag_events"]) == {"claim_pages", "contributors"}  # as before
    report = body["partitions"]
    assert report["partitions"] == layout.partitions and report["checkpoints"] == "per partition"
    assert set(report["workers"]) == {"first", "second", "idle"}

    one = report["workers"]["first"]
    assert one["live"] and one["owns"] == [p_folded] and one["epoch"] == lease.epoch and one["behind"] == []
    assert one["partitions"] == [
        {"partition": p_folded, "last_seq": folded_last, "head": folded_last, "checkpoint_epoch": lease.epoch,
         "epoch": lease.epoch, "lag_seq": 0, "lag_seconds": 0.0}
    ]
    two = report["workers"]["second"]
    assert two["owns"] == [p_waiting] and two["epoch"] == other.epoch and two["behind"] == [p_waiting]
    (held,) = two["partitions"]
    assert held["last_seq"] == 0 and held["head"] == waiting_appended.last_seq and held["lag_seq"] == waiting_appended.last_seq
    assert held["lag_seconds"] >= 0.0
    assert report["workers"]["idle"] == {"live": True, "partitions": [], "owns": [], "epoch": None, "lag_seconds": 0.0, "behind": []}
    unowned = report["unowned"]
    assert [p["partition"] for p in unowned] == [k for k in range(layout.partitions) if k not in (p_folded, p_waiting)]
    assert all(p["head"] == 0 and p["lag_seq"] == 0 and "epoch" not in p for p in unowned)

    await first.give_back([lease])
    done = await asyncio.to_thread(cli, engine, nats_url, "status", "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["projections"]["claim_pages"]["last_seq"] == folded_last  # the lowest checkpoint row, as before
    workers = status["partitions"]["workers"]
    assert workers["first"]["owns"] == [] and workers["second"]["behind"] == [p_waiting]
    assert p_folded in [p["partition"] for p in status["partitions"]["unowned"]]  # given back: nobody folds it now

    shown = await asyncio.to_thread(cli, engine, nats_url, "status")
    assert shown.returncode == 0, shown.stderr
    assert "projector workers (16 partitions, checkpoints per partition)" in shown.stdout, shown.stdout
    assert "(nobody)" in shown.stdout and "second" in shown.stdout
