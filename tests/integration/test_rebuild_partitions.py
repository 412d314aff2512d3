"""A rebuild worker on a partitioned log reads its own partitions (k % parts) and receives no other
event: real nats-server, SQLite and PostgreSQL places."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sqlalchemy import Engine, select

from projections.tables import claim_pages
from services.log import ClaimLog
from services.rebuild import parallel_worker as worker
from services.runtime.db import make_engine
from tests.conftest import random_claim_id
from tests.integration.test_parking import worker_url  # noqa: F401 - a fixture
from tests.integration.test_projector import append_history


async def test_a_rebuild_worker_receives_only_its_partitions_events(
    monkeypatch: pytest.MonkeyPatch, nats_url: str, claim_log: ClaimLog, engine: Engine, worker_url: str  # noqa: F811
):
    layout, parts = claim_log.layout, 2
    # Six claims of the other worker's partitions and four of this one's: the connection's few replies
    # and control messages must stay well below the events it would have received had it been sent everything.
    theirs: list[str] = []
    ours: list[str] = []
    while len(theirs) < 6 or len(ours) < 4:
        claim_id = random_claim_id()
        (theirs if layout.partition_of(claim_id) % parts else ours).append(claim_id)
    claims = theirs[:6] + ours[:4]
    for claim_id in claims:
        await append_history(claim_log, claim_id)
    head = await claim_log.head()
    events_of = {claim_id: len(await claim_log.read_claim(claim_id)) for claim_id in claims}
    connections = []
    real_connect = worker.connect

    async def counted(*args, **kwargs):
        nc = await real_connect(*args, **kwargs)
        connections.append(nc)
        return nc

    monkeypatch.setattr(worker, "connect", counted)
    await worker.fold_partition(nats_url, claim_log.spec, (worker_url, None), 0, parts, head, "rebuild-p0", SimpleNamespace(value=0))

    mine = sorted(c for c in claims if layout.partition_of(c) % parts == 0)
    (nc,) = connections
    assert nc.stats["in_msgs"] >= sum(events_of[c] for c in mine)
    assert nc.stats["in_msgs"] < sum(events_of.values())  # the other partitions' events never came
    place = make_engine(worker_url)
    try:
        with place.connect() as conn:
            assert sorted(conn.execute(select(claim_pages.c.claim_id)).scalars()) == mine
    finally:
        place.dispose()
