"""The fault-injection suite's fixtures, and its report: what each scenario injected and checked.

Each scenario writes lines to ``fault_report``; they are printed (captured with the test's output)
and recorded as a property, and tests/conftest.py's ``pytest_terminal_summary`` prints every scenario's
lines at the end of the run, passed or failed, so CI output shows them without ``-s`` (from there, as the
top conftest is the one pytest-xdist's controlling process loads).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine

from services.log import ClaimLog, connect
from services.runtime.embedded import EmbeddedNats
from tests.conftest import POSTGRES_URL, _postgres_database
from tests.faults.harness import CleanReplay, log_spec, migrated, publish_workload

REPLAY_CLAIMS = 10_000
REPLAY_PER_CLAIM = 10  # 100,000 events


@pytest.fixture
def fault_report(request: pytest.FixtureRequest) -> Iterator[Callable[[str], None]]:
    """``report(line)``: one line of what the scenario injected, checked or found."""
    lines: list[str] = []
    started = time.monotonic()

    def report(line: str) -> None:
        lines.append(line)
        print(f"[faults] {line}", flush=True)

    yield report
    lines.append(f"took {time.monotonic() - started:.1f}s")
    request.node.user_properties.append(("fault_report", "\n".join(lines)))


@dataclass
class PublishedLog:
    """A nats-server holding a published log, shared by the scenarios that replay it, and its clean replay."""

    url: str
    head: int
    seconds: float
    claims: int
    clean: (
        CleanReplay  # the log folded into a fresh SQLite database by an in-process projector, as far as asked
    )


async def published(directory: Path, *, claims: int, per_claim: int) -> AsyncIterator[PublishedLog]:
    # These scenarios kill projectors, not the server: its disk flush can be lazy, so publishing is faster.
    server = EmbeddedNats(directory / "nats", sync="30s")
    url = server.start()
    engine = migrated(sqlite_url(directory, "clean.sqlite3"))
    nc = None
    try:
        started = time.monotonic()
        head = await publish_workload(url, claims=claims, per_claim=per_claim)
        seconds = time.monotonic() - started
        nc = await connect(url, name="faults-clean-replay")
        clean = CleanReplay(ClaimLog(nc, log_spec()), engine, name="clean-replay")
        yield PublishedLog(url, head, seconds, claims, clean)
    finally:
        if nc is not None:
            await nc.close()
        engine.dispose()
        server.stop()


@pytest.fixture(scope="session")
async def replay_log(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PublishedLog]:
    """100,000 events over 10,000 claims with correct hash chains, published once for every scenario of the run."""
    async for log in published(
        tmp_path_factory.mktemp("faults-log"), claims=REPLAY_CLAIMS, per_claim=REPLAY_PER_CLAIM
    ):
        yield log


@pytest.fixture(scope="session")
async def small_replay_log(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PublishedLog]:
    """20,000 events over 2,000 claims: the PostgreSQL replay, slower per event, gets a shorter log."""
    async for log in published(
        tmp_path_factory.mktemp("faults-small-log"), claims=2_000, per_claim=REPLAY_PER_CLAIM
    ):
        yield log


def sqlite_url(directory: Path, name: str) -> str:
    return f"sqlite:///{directory / name}"


@dataclass(frozen=True)
class PostgresTarget:
    """A fresh PostgreSQL database for the faulted projector, and a clean replay into another one."""

    url: str
    engine: Engine
    clean: CleanReplay


@pytest.fixture
async def postgres_target(small_replay_log: PublishedLog, fault_report) -> AsyncIterator[PostgresTarget]:
    """Two fresh databases on the shared test PostgreSQL (created and dropped, the server is not touched):
    the faulted projector's, and a clean replay's of ``small_replay_log``."""
    for url in _postgres_database():
        for clean_url in _postgres_database():
            engine, clean_engine = migrated(url), migrated(clean_url)
            nc = await connect(small_replay_log.url, name="faults-clean-replay-pg")
            try:
                fault_report(f"PostgreSQL at {POSTGRES_URL.rsplit('@', 1)[-1]}")
                yield PostgresTarget(url, engine, CleanReplay(ClaimLog(nc, log_spec()), clean_engine, name="clean-replay-pg"))
            finally:
                await nc.close()
                engine.dispose()
                clean_engine.dispose()
