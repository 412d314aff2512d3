"""Shared fixtures: a real nats-server from the wheel, real SQLite and real PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import random
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from events import Actor
from services.log import ClaimLog, StreamSpec, connect
from services.runtime.db import make_engine
from services.runtime.embedded import EmbeddedNats
from tests.databases import POSTGRES_URL, Templates, migrated_database, postgres_database
from tests.shared_nats import SharedNats

__all__ = ["POSTGRES_URL"]
PERSON = Actor(id="ada", kind="person")
MODEL = Actor(id="drafter", kind="model", model="test-model-1")


def random_claim_id() -> str:
    """A claim id no other test uses."""
    return f"CLM-{random.randint(10**8, 10**9 - 1)}"


def at(minute: int = 0) -> datetime:
    """A fixed, readable point in time."""
    return datetime(2026, 11, 30, 12, minute, tzinfo=UTC)


@pytest.fixture(scope="session", autouse=True)
async def _loop_ends_clean(pytestconfig: pytest.Config) -> AsyncIterator[None]:
    """At the end of the run, before the run's event loop closes: name what a test left running on it.

    Closing the loop cancels the tasks left on it and waits for the threads of its default executor;
    one that never ends would hang the run after its last test with no word of where it came from.
    This says which tasks and threads were left, with their stacks, and gives them a bounded time.
    """
    yield
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")

    def say(text: str) -> None:
        if terminal is not None:
            terminal.write_line(text)

    me = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not me and not task.done()]
    for task in left:
        say(f"claimlog tests: a task was left running on the run's event loop: {task!r}")
        task.cancel()
    if left:
        _done, stuck = await asyncio.wait(left, timeout=20)
        for task in stuck:
            stack = io.StringIO()
            task.print_stack(file=stack)
            say(f"claimlog tests: it ignores cancellation: {task!r}\n{stack.getvalue()}")
    for thread in threading.enumerate():
        if thread.name.startswith("asyncio_") and _busy(thread):
            for _ in range(200):  # a call that ends within 20 s is fine
                if not _busy(thread):
                    break
                await asyncio.sleep(0.1)
            else:
                frame = sys._current_frames()[thread.ident]
                say(f"claimlog tests: the event loop's thread {thread.name} is still busy:\n" + "".join(traceback.format_stack(frame)))


def _busy(thread: threading.Thread) -> bool:
    """Whether an executor's thread is running a call (an idle one waits in its ``_worker`` loop)."""
    frame = sys._current_frames().get(thread.ident)
    return thread.is_alive() and frame is not None and frame.f_code.co_name != "_worker"


@pytest.fixture
def claim_id() -> str:
    return random_claim_id()


@pytest.fixture(scope="session")
def shared_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedNats]:
    """The run's nats-server whose accounts the tests take in turn (see tests/shared_nats.py)."""
    server = SharedNats(tmp_path_factory.mktemp("shared-nats"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def nats_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A NATS URL with every permission on a JetStream nobody else uses: an account of its own on the
    run's shared server, or, for a test marked ``private_nats``, the admin's URL on a fresh embedded
    nats-server in a temporary store, on a free loopback port."""
    if request.node.get_closest_marker("private_nats") is None:
        yield request.getfixturevalue("shared_nats").take()
        return
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
    """An empty database of its own on the test PostgreSQL, dropped afterwards."""
    return postgres_database()


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    """The run's migrated template databases (see tests/databases.py)."""
    made = Templates(tmp_path_factory.mktemp("templates"))
    yield made
    made.close()


def _wants_migrated(request: pytest.FixtureRequest) -> bool:
    return "engine" in request.fixturenames


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path, templates: Templates) -> Iterator[str]:
    """A database of its own for the test, SQLite in a temporary file or PostgreSQL: a migrated copy of
    the template when the test takes ``engine``, else empty (not even the SQLite file exists)."""
    if _wants_migrated(request):
        yield from migrated_database(templates, request.param, tmp_path, "read-models.sqlite3")
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'read-models.sqlite3'}"
    else:
        yield from postgres_database()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on the test's migrated read-model database."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def second_database(database_url: str, tmp_path: Path) -> Iterator[str]:
    """Another empty database of the same kind, for comparing a replay with a live run."""
    if database_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'replay.sqlite3'}"
    else:
        yield from postgres_database()


def second_migrated_database(database_url: str, tmp_path: Path, templates: Templates) -> Iterator[str]:
    """Another migrated database of the same kind, made from the template."""
    kind = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    yield from migrated_database(templates, kind, tmp_path, "replay.sqlite3")
