"""Shared fixtures: a real nats-server from the wheel, real SQLite and real PostgreSQL."""

from __future__ import annotations

import os
import random
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from events import Actor
from services.db import make_engine, upgrade
from services.embedded import EmbeddedNats
from services.log import ClaimLog, StreamSpec, connect

POSTGRES_URL = os.environ.get("CLAIMLOG_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PERSON = Actor(id="ada", kind="person")
MODEL = Actor(id="drafter", kind="model", model="test-model-1")


def random_claim_id() -> str:
    """A claim id no other test uses."""
    return f"CLM-{random.randint(10**8, 10**9 - 1)}"


def at(minute: int = 0) -> datetime:
    """A fixed, readable point in time."""
    return datetime(2026, 11, 30, 12, minute, tzinfo=UTC)


@pytest.fixture
def claim_id() -> str:
    return random_claim_id()


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    """A fresh nats-server with JetStream in a temporary store, on a free loopback port: its admin URL."""
    server = EmbeddedNats(tmp_path / "nats", sync="always")
    server.start()
    yield server.url_for("admin")
    server.stop()


@pytest.fixture
async def claim_log(nats_url: str) -> AsyncIterator[ClaimLog]:
    nc = await connect(nats_url)
    log = ClaimLog(nc, StreamSpec("CLAIMS"))
    await log.ensure()
    yield log
    await nc.close()


def _postgres_database() -> Iterator[str]:
    admin = create_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
    name = f"claimlog_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database: SQLite in a temporary file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'read-models.sqlite3'}"
    else:
        yield from _postgres_database()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A migrated read-model database."""
    engine = make_engine(database_url)
    upgrade(engine)
    yield engine
    engine.dispose()


def second_database(database_url: str, tmp_path: Path) -> Iterator[str]:
    """Another empty database of the same kind, for comparing a replay with a live run."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'replay.sqlite3'}"
    else:
        yield from _postgres_database()
