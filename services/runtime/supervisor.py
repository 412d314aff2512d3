"""``claimlog up``: the embedded NATS, migrations, the projector and the read API as one process tree."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from services.runtime.processes import terminate

log = logging.getLogger(__name__)
RESTART_BACKOFF = (0.5, 1, 2, 5, 10)


@dataclass
class Child:
    """A service the supervisor keeps running, with its own environment (its own NATS credentials)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(repr=False)  # holds a NATS password
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        """Start (or restart) the service."""
        self.process = subprocess.Popen(self.argv, env=self.env)
        self.started_at = time.monotonic()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask it to stop, and kill it if it does not."""
        terminate(self.process, timeout=timeout)


class Supervisor:
    """Starts the children, restarts any that die, and stops them all on SIGINT or SIGTERM."""

    def __init__(self, children: list[Child]) -> None:
        self.children = children
        self.stopping = False

    def start(self) -> None:
        """Start every child and stop on SIGINT/SIGTERM."""
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        for child in self.children:
            child.start()

    def watch(self) -> None:
        """Restart children that exit, until asked to stop."""
        while not self.stopping:
            for child in self.children:
                code = child.process.poll() if child.process else None
                if code is not None and not self.stopping:
                    self._restart(child, code)
            time.sleep(0.2)

    def _restart(self, child: Child, code: int) -> None:
        if time.monotonic() - child.started_at > 60:
            child.restarts = 0
        delay = RESTART_BACKOFF[min(child.restarts, len(RESTART_BACKOFF) - 1)]
        log.warning("%s exited with code %s; restarting in %ss", child.name, code, delay)
        time.sleep(delay)
        child.restarts += 1
        child.start()

    def stop(self) -> None:
        """Stop every child, last started first."""
        self.stopping = True
        for child in reversed(self.children):
            child.stop()

    def _on_signal(self, signum: int, _frame) -> None:
        self.stopping = True


def service_argv(*args: str) -> list[str]:
    """The command that runs one claimlog service with this interpreter."""
    return [sys.executable, "-m", "services.cli", *args]


def child_env(nats_url: str) -> dict[str, str]:
    """A child's environment: the parent's, pointed at the NATS server with the child's own credentials."""
    return {**os.environ, "CLAIMLOG_NATS_URL": nats_url}
