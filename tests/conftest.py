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
TESTS = Path(__file__).resolve().parent
# Each folder of tests and the marker every test in it gets, so that ``-m`` selects a layer of the suite.
FOLDER_MARKERS = {
    "unit": "unit",
    "integration": "integration",
    "faults": "faults",
    "contract": "contract",
    "e2e": "e2e",
    "cluster": "cluster",
    "lifecycle": "lifecycle",
}
PERSON = Actor(id="ada", kind="person")
MODEL = Actor(id="drafter", kind="model", model="test-model-1")


def random_claim_id() -> str:
    """A claim id no other test uses."""
    return f"CLM-{random.randint(10**8, 10**9 - 1)}"


def at(minute: int = 0) -> datetime:
    """A fixed, readable point in time."""
    return datetime(2026, 11, 30, 12, minute, tzinfo=UTC)


def folder_marker(path: Path) -> str:
    """The marker of the test file at ``path``: its folder's, directly under tests/."""
    parts = path.resolve().relative_to(TESTS).parts
    if len(parts) < 2 or parts[0] not in FOLDER_MARKERS:
        raise pytest.UsageError(f"{path}: a test outside the folders of FOLDER_MARKERS in tests/conftest.py gets no marker; add its folder there")
    return FOLDER_MARKERS[parts[0]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its folder's marker (``-m unit``, ``-m "integration or e2e"``)."""
    for item in items:
        item.add_marker(folder_marker(item.path))


OUTCOMES: dict[str, str] = {}  # test id -> passed / failed
REPORTS: dict[str, str] = {}  # test id -> its fault report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.failed:
        OUTCOMES[report.nodeid] = "failed" if report.failed else report.outcome
    for name, value in report.user_properties:
        if name == "fault_report":
            REPORTS[report.nodeid] = value


def fault_reports(terminalreporter: pytest.TerminalReporter) -> None:
    """Every fault scenario's lines (tests/faults: ``fault_report``), passed or failed."""
    if not REPORTS:
        return
    terminalreporter.section("fault injection: what was injected and checked")
    for nodeid, text in REPORTS.items():
        outcome = OUTCOMES.get(nodeid, "error")
        terminalreporter.write_line(f"{nodeid.split('::')[-1]} [{outcome}]")
        for line in text.splitlines():
            terminalreporter.write_line(f"    {line}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What each folder of tests (and so each folder marker) cost this run: its tests and the sum of their
    setup, call and teardown times, dearest first; CI's budget is kept by these figures."""
    spent: dict[str, float] = {}
    tests: dict[str, set[str]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            nodeid, duration = getattr(report, "nodeid", ""), getattr(report, "duration", None)
            if not nodeid.startswith("tests/") or duration is None or nodeid.count("/") < 2:
                continue
            folder = nodeid.split("/")[1]
            spent[folder] = spent.get(folder, 0.0) + duration
            tests.setdefault(folder, set()).add(nodeid)
    if not spent:
        return
    terminalreporter.section("time by folder of tests (sum of setup, call and teardown)")
    for folder, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"tests/{folder:<12} {len(tests[folder]):>5} tests {seconds:>8.0f} s")


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
