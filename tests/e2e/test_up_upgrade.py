"""An upgrade checks everything that can refuse before it changes anything: a refused ``claimlog up`` leaves
the data directory as it found it, so the release that wrote it still starts on it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from alembic import command
from alembic.config import Config

from events.subjects import LogLayout
from services.log import ClaimLog, StreamSpec, connect
from services.runtime.db import MIGRATIONS_DIR, make_engine, upgrade
from services.runtime.embedded import EmbeddedNats
from tests.builders import attached, drafted
from tests.e2e.test_up import free_port

EARLIER_HEAD = "0013"  # the newest migration of the release before checkpoints carried epochs


def claimlog(*args: str, cwd: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")} | settings
    return subprocess.run([sys.executable, "-m", "services.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def contents(data_dir: Path) -> dict[str, str]:
    """Every file of the data directory and its hash, but the server's own log, which each start appends to."""
    return {
        str(path.relative_to(data_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data_dir.rglob("*"))
        if path.is_file() and path.name != "nats-server.log"
    }


def revision(database: Path) -> str:
    with closing(sqlite3.connect(database)) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


async def unpartitioned_log(data_dir: Path) -> None:
    """The log as a release before partitions made it: events stored under the subjects they were published on."""
    server = EmbeddedNats(data_dir)
    url = server.start()
    try:
        nc = await connect(url)
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 0)))
        await claim_log.ensure()
        await claim_log.append("CLM-0001", [drafted("CLM-0001"), attached("CLM-0001", "s1")], expected_seq=0, prev_hash=None)
        await nc.close()
    finally:
        server.stop()


def earlier_release_migrates(database: Path, scripts: Path) -> None:
    """What the earlier release does with the database as it starts: migrate it with the migrations it ships."""
    shutil.copytree(MIGRATIONS_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    for later in scripts.glob("versions/*.py"):
        if later.name[:4].isdigit() and later.name[:4] > EARLIER_HEAD:
            later.unlink()
    config = Config()
    config.set_main_option("script_location", str(scripts))
    engine = make_engine(f"sqlite:///{database}")
    config.attributes["engine"] = engine
    try:
        command.upgrade(config, "head")
    finally:
        engine.dispose()


def test_up_refuses_the_partitions_of_an_earlier_log_before_migrating_and_leaves_the_data_directory_as_it_was(tmp_path: Path):
    data_dir = tmp_path / ".claimlog"
    asyncio.run(unpartitioned_log(data_dir))
    engine = make_engine(f"sqlite:///{data_dir / 'claimlog.sqlite3'}")
    upgrade(engine, EARLIER_HEAD)
    engine.dispose()
    before = contents(data_dir)

    refused = claimlog("up", "--port", str(free_port()), cwd=tmp_path)

    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert "unpartitioned (as published), but CLAIMLOG_PARTITIONS is 16" in said and "set CLAIMLOG_PARTITIONS=0" in said
    assert revision(data_dir / "claimlog.sqlite3") == EARLIER_HEAD
    assert contents(data_dir) == before
    earlier_release_migrates(data_dir / "claimlog.sqlite3", tmp_path / "earlier-migrations")
    assert revision(data_dir / "claimlog.sqlite3") == EARLIER_HEAD


def test_up_and_db_upgrade_refuse_a_database_of_a_newer_claimlog_before_anything_else(tmp_path: Path):
    data_dir = tmp_path / ".claimlog"
    database = data_dir / "claimlog.sqlite3"
    engine = make_engine(f"sqlite:///{database}")
    upgrade(engine)
    engine.dispose()
    with closing(sqlite3.connect(database)) as conn, conn:
        conn.execute("UPDATE alembic_version SET version_num = '0999'")
    before = contents(data_dir)

    for refused in (claimlog("up", "--port", str(free_port()), cwd=tmp_path), claimlog("db", "upgrade", cwd=tmp_path)):
        said = " ".join((refused.stdout + refused.stderr).split())
        assert refused.returncode == 2, said
        assert "schema revision 0999, which this claimlog does not know" in said and "newer claimlog" in said
    assert contents(data_dir) == before
    assert not (data_dir / "jetstream").exists() and not (data_dir / "nats.json").exists()


def test_up_refuses_more_copies_than_its_servers_can_hold_before_making_the_database(tmp_path: Path):
    refused = claimlog("up", "--port", str(free_port()), cwd=tmp_path, CLAIMLOG_NATS_REPLICAS="3")

    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, said
    assert "CLAIMLOG_NATS_REPLICAS is 3, but the NATS of" in said and "has 1 server(s)" in said and "Nothing was changed" in said
    assert not (tmp_path / ".claimlog" / "claimlog.sqlite3").exists()
    assert not list((tmp_path / ".claimlog" / "jetstream").rglob("meta.inf"))  # no stream or bucket made


def test_an_unpartitioned_registry_moves_into_partitions_with_its_tokens_by_backup_and_restore(tmp_path: Path):
    old, new = tmp_path / "old", tmp_path / "new"
    asyncio.run(unpartitioned_log(old / ".claimlog"))
    added = claimlog("actors", "add", "ada", "--kind", "person", cwd=old, CLAIMLOG_PARTITIONS="0")
    assert added.returncode == 0, added.stderr
    backup = claimlog("backup", str(tmp_path / "moved"), cwd=old, CLAIMLOG_PARTITIONS="0")
    assert backup.returncode == 0, backup.stderr

    restored = claimlog("restore", str(tmp_path / "moved"), cwd=tmp_path, CLAIMLOG_DATA_DIR=str(new))
    assert restored.returncode == 0, restored.stdout + restored.stderr

    exported = claimlog("export", cwd=tmp_path, CLAIMLOG_DATA_DIR=str(new))  # read on the default partitions, or refused
    assert exported.returncode == 0, exported.stderr
    subjects = [json.loads(line)["subject"].split(".") for line in exported.stdout.splitlines()]
    assert len(subjects) == 2 and all(len(s) == 4 and s[0] == "claims" and s[2] == "CLM-0001" for s in subjects)  # in a partition
    listed = claimlog("actors", "list", cwd=tmp_path, CLAIMLOG_DATA_DIR=str(new))
    assert listed.returncode == 0 and "ada" in listed.stdout, listed.stdout + listed.stderr
