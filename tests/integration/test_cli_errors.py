"""The ``claimlog`` command stops on a server it cannot reach or a database it cannot use with one message
that says what and where, exit code 2 and no traceback; a bug keeps its traceback. A service that waits
for NATS says so in its log."""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from nats.js.errors import NotFoundError
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from services.cli.errors import explain
from services.log import LogError, connect
from services.log.servers import ErrorLog
from services.runtime.db import make_engine
from services.runtime.settings import Settings

RETRYING_SECONDS = 1.5  # several reconnect attempts, well within the quiet time between repeats
SAMPLES = Path(__file__).resolve().parents[2] / "services" / "ingest" / "samples"


def claimlog(*args: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAIMLOG_DATA_DIR": str(cwd / ".claimlog"), "COLUMNS": "250"}
    env |= {f"CLAIMLOG_{name.upper()}": value for name, value in settings.items()}
    return subprocess.run([sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def assert_explained(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    for words in expected:
        assert words in " ".join(done.stderr.split()), done.stderr


def test_a_nats_server_that_is_not_there_is_named_after_the_connect_wait(tmp_path: Path):
    port = closed_port()
    started = time.monotonic()
    done = claimlog("history", "CLM-0338", cwd=tmp_path, nats_url=f"nats://127.0.0.1:{port}", nats_connect_seconds="1.5")
    assert_explained(done, f"could not connect to NATS at nats://127.0.0.1:{port} within 1.5s", "Connection refused")
    assert time.monotonic() - started < 30


def test_the_api_does_not_start_without_its_nats_server(engine, tmp_path: Path):
    port = closed_port()
    url = engine.url.render_as_string(hide_password=False)
    done = claimlog("api", "--port", str(closed_port()), cwd=tmp_path, nats_url=f"nats://127.0.0.1:{port}", nats_connect_seconds="1", database_url=url)
    assert_explained(done, f"could not connect to NATS at nats://127.0.0.1:{port} within 1s")


@pytest.mark.private_nats  # the embedded server's admin user, named in the message
def test_wrong_nats_credentials_are_named_without_the_password(nats_url: str, tmp_path: Path):
    wrong = nats_url.replace("admin:", "admin:not-", 1)
    assert wrong != nats_url
    done = claimlog("history", "CLM-0338", cwd=tmp_path, nats_url=wrong, nats_connect_seconds="2")
    assert_explained(done, "could not connect to NATS at nats://admin:***@", "Authorization Violation")
    assert "not-" not in done.stderr


async def test_the_first_connection_waits_a_bounded_time_and_says_why_it_failed():
    with pytest.raises(LogError, match=r"within 0.5s \(ConnectionRefusedError"):
        await connect(f"nats://127.0.0.1:{closed_port()}", first_connect_seconds=0.5)


def test_a_projector_waiting_for_nats_logs_why_once_in_a_while(engine, tmp_path: Path):
    env = {
        **os.environ, "COLUMNS": "250", "CLAIMLOG_DATA_DIR": str(tmp_path / ".claimlog"),
        "CLAIMLOG_NATS_URL": f"nats://127.0.0.1:{closed_port()}", "CLAIMLOG_DATABASE_URL": str(engine.url.render_as_string(hide_password=False)),
    }
    projector = subprocess.Popen([sys.executable, "-m", "services.cli", "projector"], env=env, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in projector.stderr], daemon=True)
    reader.start()
    try:
        said = []
        while not any("Connection refused" in line for line in said):  # however long the start takes
            said.append(lines.get(timeout=60))
        time.sleep(RETRYING_SECONDS)  # it keeps retrying, four times a second, while this watches
    finally:
        projector.send_signal(signal.SIGTERM)
        projector.wait(timeout=30)
        reader.join(timeout=30)
    while not lines.empty():
        said.append(lines.get())
    stderr = "".join(said)
    logged = " ".join(stderr.split())
    assert "NATS at nats://127.0.0.1:" in logged and "Connection refused" in logged, stderr
    assert logged.count("Connection refused") == 1, stderr  # once, though retried several times meanwhile
    assert "Traceback" not in stderr, stderr


async def test_an_error_is_logged_once_until_it_has_been_quiet_for_a_while(caplog: pytest.LogCaptureFixture):
    errors = ErrorLog("nats://admin:secret@127.0.0.1:4222")
    with caplog.at_level(logging.WARNING, logger="services.log.servers"):
        for _ in range(3):
            await errors.report(ConnectionRefusedError(111, "Connection refused"))
        await errors.report(TimeoutError())
        errors.quiet = True
        await errors.report(OSError("not while quiet"))
    assert [r.getMessage() for r in caplog.records] == [
        "NATS at nats://admin:***@127.0.0.1:4222: ConnectionRefusedError: [Errno 111] Connection refused",
        "NATS at nats://admin:***@127.0.0.1:4222: TimeoutError",
    ]


def test_a_database_that_is_not_there_or_not_migrated_says_what_to_run(database_url: str, tmp_path: Path):
    if database_url.startswith("sqlite"):
        nowhere = f"sqlite:///{tmp_path / 'not-made-yet' / 'claimlog.sqlite3'}"
        missing = claimlog("unreadable", cwd=tmp_path, database_url=nowhere)
        assert_explained(missing, "there is no read-model database at sqlite:///", "run `claimlog db upgrade`")
        sqlite3.connect(database_url.removeprefix("sqlite:///")).close()  # a file without claimlog's tables
    empty = claimlog("unreadable", cwd=tmp_path, database_url=database_url)
    assert_explained(empty, "has no claimlog tables", "run `claimlog db upgrade`")


def test_reading_a_data_directory_that_holds_no_log_yet_says_so_and_makes_nothing(tmp_path: Path):
    for command in (("show", "CLM-0338"), ("history", "CLM-0338"), ("verify",)):
        done = claimlog(*command, cwd=tmp_path)
        assert_explained(done, f"no claim log in {tmp_path / '.claimlog'} yet", "`claimlog up` or `claimlog ingest`")
    assert not (tmp_path / ".claimlog").exists()


def test_ingest_starts_the_log_of_a_new_data_directory_and_reads_make_no_database(tmp_path: Path):
    done = claimlog("ingest", str(SAMPLES / "CLM-0338.txt"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    history = claimlog("history", "CLM-0338", "--json", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    assert json.loads(history.stdout)[0]["type"] == "ClaimDrafted"
    shown = claimlog("show", "CLM-0338", cwd=tmp_path)  # folded from the log alone
    assert shown.returncode == 0, shown.stderr
    assert "unreviewed model draft: moves no standing" in shown.stdout and "standing validated" not in shown.stdout
    assert "Measured across three model sizes" in shown.stdout and "[truncated]" in shown.stdout
    assert "drafted confidence: low" in shown.stdout and "falsifier as drafted: An implementation" in shown.stdout
    by_slug = claimlog("show", "a-slug-is-looked-up-in-the-read-models", cwd=tmp_path)
    assert_explained(by_slug, "there is no read-model database at sqlite:///", "run `claimlog db upgrade`")
    assert not (tmp_path / ".claimlog" / "claimlog.sqlite3").exists()


async def test_reading_a_server_without_the_stream_is_told_and_creates_nothing(nats_url: str, engine, tmp_path: Path):
    database = engine.url.render_as_string(hide_password=False)
    for command in (("history", "CLM-0338"), ("verify",)):  # with the admin's URL: reading never creates the stream
        done = claimlog(*command, cwd=tmp_path, nats_url=nats_url, database_url=database)
        assert_explained(done, "stream CLAIMS does not exist on this NATS server yet", "`claimlog up` creates it")
    nc = await connect(nats_url)
    with pytest.raises(NotFoundError):
        await nc.jetstream().stream_info("CLAIMS")
    await nc.close()


def test_a_database_server_that_is_not_there_is_named(tmp_path: Path):
    url = f"postgresql://claimlog:secret@127.0.0.1:{closed_port()}/registry"
    done = claimlog("unreadable", cwd=tmp_path, database_url=url)
    assert_explained(done, "could not open the read-model database at postgresql://claimlog:***@127.0.0.1", "CLAIMLOG_DATABASE_URL")
    assert "secret" not in done.stderr


def test_an_error_nobody_can_act_on_is_left_to_its_traceback(engine, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLAIMLOG_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    settings = Settings()
    assert explain(ValueError("a bug"), settings) is None
    with pytest.raises(DBAPIError) as bad_sql, make_engine(str(engine.url)).connect() as conn:
        conn.execute(text("SELECT claim_id FROM claim_pages WHERE"))
    assert explain(bad_sql.value, settings) is None
    with pytest.raises(DBAPIError) as missing, engine.connect() as conn:
        conn.execute(text("SELECT * FROM no_such_read_model"))
    assert "no claimlog tables" in explain(missing.value, settings)


def said(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return " ".join(done.stderr.replace("│", " ").split())


def test_a_claim_that_is_not_there_says_how_claims_are_named_or_where_to_find_them(tmp_path: Path):
    assert claimlog("ingest", str(SAMPLES / "CLM-0338.txt"), cwd=tmp_path).returncode == 0
    for command in ("show", "history"):
        assert "no claim 'Not A Claim': name a claim by its id (CLM- and 4 to 12 digits, e.g. CLM-0338) or its slug" in said(
            claimlog(command, "Not A Claim", cwd=tmp_path), 2)
        assert "no claim 'CLM-9999' in this registry: check the id or slug; the listing names every claim (GET /claims" in said(
            claimlog(command, "CLM-9999", cwd=tmp_path), 1)
    assert "no claim 'CLM-0338' as of sequence 0: it was drafted after that point, or never; `claimlog history CLM-0338`" in said(
        claimlog("show", "CLM-0338", "--as-of-seq", "0", cwd=tmp_path), 1)
    out = tmp_path / "export.jsonl"
    assert "no claim 'CLM-9999' in this registry" in said(claimlog("export", "--claim", "CLM-9999", "--out", str(out), cwd=tmp_path), 1)
    assert not out.exists()  # no empty export left behind
    assert "exported 7 events of CLM-0338" in said(claimlog("export", "--claim", "CLM-0338", "--out", str(out), cwd=tmp_path), 0)


def test_revoking_tokens_nobody_holds_points_to_the_list(tmp_path: Path):
    assert claimlog("actors", "add", "ada", cwd=tmp_path).returncode == 0
    assert "no live token of nobody: claimlog actors list shows every token" in said(
        claimlog("actors", "revoke", "nobody", cwd=tmp_path), 1)


def test_a_migration_that_does_not_exist_is_named_with_what_to_type(database_url: str, tmp_path: Path):
    done = claimlog("db", "upgrade", "no-such-revision", cwd=tmp_path, database_url=database_url)
    assert "Can't locate revision identified by 'no-such-revision' in claimlog's migrations: leave it out to migrate to the newest" in said(done, 2)
