"""A process's log read from a pipe or a file (not a terminal) is plain text."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from sqlalchemy import Engine

from services.log import ClaimLog

ESCAPE = "\x1b["  # the start of every ANSI colour code


def test_the_projectors_log_through_a_pipe_holds_no_colour_codes(claim_log: ClaimLog, nats_url: str, engine: Engine):
    env = {
        **os.environ, "COLUMNS": "250", "CLAIMLOG_NATS_URL": nats_url,
        "CLAIMLOG_DATABASE_URL": engine.url.render_as_string(hide_password=False),
    }
    projector = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "projector"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in projector.stdout], daemon=True)
    reader.start()
    said: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not any("projector projector started" in line for line in said):  # it has connected and logged
            said.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
    finally:
        projector.send_signal(signal.SIGTERM)
        projector.wait(timeout=30)
        reader.join(timeout=30)
    while not lines.empty():
        said.append(lines.get())
    output = "".join(said)
    assert "projector" in output and ESCAPE not in output, output
