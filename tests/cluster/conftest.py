"""A real three-node JetStream cluster of the wheel's nats-server on loopback, one per test, and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from services.identity.actors import ActorStore
from services.log import ClaimLog, StreamSpec, connect
from services.runtime.cluster import LocalCluster
from services.runtime.db import make_engine, upgrade
from tests.conftest import POSTGRES_URL


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "data", size=3) as running:
        yield running


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped after the test."""
    admin = create_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    name = f"claimlog_cluster_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def pg_engine(postgres_url: str) -> Iterator[Engine]:
    """The migrated read models in that database."""
    engine = make_engine(postgres_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
async def replicated_log(cluster: LocalCluster) -> AsyncIterator[ClaimLog]:
    """The log and the token store on the cluster, three copies of each."""
    nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS", replicas=3))
        await claim_log.ensure()
        await ActorStore.open(nc, create=True, replicas=3)
        yield claim_log
    finally:
        await nc.close()
