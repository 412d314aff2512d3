"""``claimlog projector`` holds one NATS connection: the stream's info, the events, the leases and the
notices all go over it (no second connection kept only for a framework's lifecycle). The server's own
monitoring (``/connz``) counts the connections of the projector's NATS user while it folds."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from sqlalchemy import Engine

from services.runtime.embedded import EmbeddedNats
from services.runtime.from_settings import ensure_log
from services.runtime.nats_roles import user_name
from services.runtime.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def projector_connections(monitor_port: int) -> list[dict]:
    """The open connections of the projector role's NATS user, as the server lists them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/connz?auth=true&limit=1024", timeout=5) as answer:
        connz = json.load(answer)
    return [c for c in connz.get("connections") or [] if c.get("authorized_user") == user_name("projector")]


@pytest.mark.parametrize("partitions", [0, 4])
async def test_the_projector_process_opens_one_nats_connection(engine: Engine, tmp_path: Path, partitions: int):
    monitor_port = free_port()
    server = EmbeddedNats(tmp_path / "nats", sync="always", monitor_port=monitor_port)
    server.start()
    projector = None
    try:
        await ensure_log(Settings(data_dir=tmp_path / "nats", nats_url=server.url_for("admin"), partitions=partitions))
        env = {
            **os.environ, "COLUMNS": "250", "CLAIMLOG_DATA_DIR": str(tmp_path / "nats"), "CLAIMLOG_PARTITIONS": str(partitions),
            "CLAIMLOG_NATS_URL": server.url_for("projector"), "CLAIMLOG_DATABASE_URL": engine.url.render_as_string(hide_password=False),
        }
        projector = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "projector"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in projector.stdout], daemon=True).start()
        said: list[str] = []
        deadline = time.monotonic() + 60
        while not any("projector projector started" in line for line in said):
            said.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        counts = []
        for _ in range(10):  # while it folds (a worker holding its leases): never a second connection
            counts.append(len(projector_connections(monitor_port)))
            time.sleep(0.1)
        assert counts == [1] * len(counts), (counts, "".join(said))
        projector.send_signal(signal.SIGTERM)
        assert projector.wait(timeout=30) == 0
        gone = time.monotonic() + 5
        while projector_connections(monitor_port) and time.monotonic() < gone:  # the server notices the closed socket
            time.sleep(0.05)
        assert projector_connections(monitor_port) == []
    finally:
        if projector is not None and projector.poll() is None:
            projector.kill()
            projector.wait()
        server.stop()
