"""Read your writes on a partitioned log: a claim's page waits for its own partition only, a listing for
every partition, and a partition with nothing unapplied at or below the sequence never blocks. Partition
runners on a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy import Engine

from projections.registry import build_projections
from services.log import ClaimLog
from services.projector import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.read_api.api_state import api_state
from services.read_api.visibility import applied
from tests.builders import history
from tests.conftest import random_claim_id
from tests.integration.guarded_api import guarded_api
from tests.waiting import checkpoint_polls

WAIT = 10.0  # guarded_api's read_wait


def claims_in_two_partitions(claim_log: ClaimLog) -> tuple[str, str]:
    first = random_claim_id()
    while True:
        second = random_claim_id()
        if claim_log.layout.partition_of(second) != claim_log.layout.partition_of(first):
            return first, second


async def fold_partition(claim_log: ClaimLog, engine: Engine, partition: int, through: int, *, epoch: int = 1) -> None:
    writer = CheckpointedWriter(engine, build_projections(), partitions=claim_log.layout.partitions)
    runner = Runner(claim_log, writer, name=f"p{partition}", batch=50, scope=Scope(partition=partition), epoch=epoch)
    await runner.run_until(through, timeout=30)


async def test_a_claim_waits_for_its_partition_only_and_a_listing_for_every_one(claim_log: ClaimLog, engine: Engine):
    layout = claim_log.layout
    assert layout.partitions > 2
    quiet, busy = claims_in_two_partitions(claim_log)
    quiet_last = (await claim_log.append(quiet, history(quiet), expected_seq=0, prev_hash=None)).last_seq
    busy_last = (await claim_log.append(busy, history(busy), expected_seq=0, prev_hash=None)).last_seq
    target = busy_last  # the last write of all: the quiet claim's partition holds nothing more up to it
    await fold_partition(claim_log, engine, layout.partition_of(quiet), quiet_last)

    async for guarded in guarded_api(claim_log, engine):
        http = guarded.api.http
        # The quiet claim's partition is applied; every other partition but the busy one holds no event at all.
        page = await asyncio.wait_for(http.get(f"/claims/{quiet}", params={"after": target}), WAIT / 2)
        assert page.status_code == 200 and page.json()["claim_id"] == quiet, page.text
        slug = page.json()["slug"]
        for path in (f"/claims/{slug}", f"/claims/{quiet}/text", f"/pages/claims/{quiet}", f"/claims/{quiet}/counts"):
            response = await asyncio.wait_for(http.get(path, headers={"Claimlog-After": str(target)}), WAIT / 2)
            assert response.status_code == 200, (path, response.text)

        # The busy claim's partition has not applied its events: its page and every listing wait.
        with checkpoint_polls(engine) as polls:
            waiting = {
                path: asyncio.create_task(http.get(path, params={"after": target}))
                for path in (f"/claims/{busy}", "/claims", "/scorecard", "/pages/claims")
            }
            await polls.until_parked(len(waiting))  # each past its first look, polling the checkpoints
        assert not [path for path, task in waiting.items() if task.done()], {p: t.result().text for p, t in waiting.items() if t.done()}
        # ...while the quiet claim's page is still answered at once.
        again = await asyncio.wait_for(http.get(f"/claims/{quiet}", params={"after": target}), WAIT / 2)
        assert again.status_code == 200

        await fold_partition(claim_log, engine, layout.partition_of(busy), busy_last)
        for path, task in waiting.items():
            response = await asyncio.wait_for(task, WAIT)
            assert response.status_code == 200, (path, response.text)
        assert api_state(guarded.app).reads.applied >= target  # every partition is now known past it
    assert applied(engine, layout) < target  # the lowest checkpoint alone would still say otherwise


async def test_a_partition_that_never_applies_answers_503_naming_it(claim_log: ClaimLog, engine: Engine):
    quiet, busy = claims_in_two_partitions(claim_log)
    quiet_last = (await claim_log.append(quiet, history(quiet), expected_seq=0, prev_hash=None)).last_seq
    target = (await claim_log.append(busy, history(busy), expected_seq=0, prev_hash=None)).last_seq
    await fold_partition(claim_log, engine, claim_log.layout.partition_of(quiet), quiet_last)
    async for guarded in guarded_api(claim_log, engine):
        api_state(guarded.app).read_wait = 0.5
        response = await guarded.api.http.get(f"/claims/{busy}", params={"after": target})
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["error"] == "not_yet_visible"
        assert f"in partition {claim_log.layout.partition_of(busy)} up to " in body["message"], body
        assert (await guarded.api.http.get(f"/claims/{quiet}", params={"after": target})).status_code == 200
