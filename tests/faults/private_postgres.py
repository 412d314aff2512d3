"""A PostgreSQL server of the test's own (initdb + pg_ctl, a temporary directory, a free loopback port),
so a scenario can stop and start it; the machine's shared server is never touched.

initdb refuses to run as root: as root, the server's commands run as the ``postgres`` user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, text


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise AssertionError(
            "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        )
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrivatePostgres:
    """One PostgreSQL cluster in a temporary directory, started and stopped by the test."""

    def __init__(self) -> None:
        self.bindir = _bindir()
        self.root = Path(tempfile.mkdtemp(prefix="claimlog-faults-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._as = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as, str(self.bindir / tool), *args], capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0:
            raise AssertionError(
                f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}"
            )

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "30",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """``fast``: clients are disconnected, a clean shutdown; ``immediate``: no shutdown, WAL recovery at the next start."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        admin = create_engine(
            self.url().replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT"
        )
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return self.url(name)

    def remove(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(AssertionError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
