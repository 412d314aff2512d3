"""``claimlog up``: the embedded NATS, migrations, the projector and the read API as one process tree."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from services.runtime.processes import terminate

log = logging.getLogger(__name__)
RESTART_BACKOFF = (0.5, 1, 2, 5, 10)


class Supervised(Protocol):
    """What the supervisor watches: a named process it can start again, and how often it has lately."""

    name: str
    restarts: int
    started_at: float

    @property
    def process(self) -> subprocess.Popen[bytes] | None: ...

    def start(self) -> None: ...


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
    """Starts the children, restarts any that die, and stops them all on SIGINT or SIGTERM.

    ``running``: processes started and stopped by their owner (the nats-servers ``claimlog up`` runs), which
    the supervisor restarts as it does its children when they exit."""

    def __init__(self, children: list[Child], *, running: Iterable[Supervised] = ()) -> None:
        self.children = children
        self.running = list(running)
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
            for child in [*self.running, *self.children]:
                code = child.process.poll() if child.process else None  # poll() also reaps it: no zombie
                if code is not None and not self.stopping:
                    self._restart(child, code)
            time.sleep(0.2)

    def _restart(self, child: Supervised, code: int) -> None:
        if time.monotonic() - child.started_at > 60:
            child.restarts = 0
        delay = RESTART_BACKOFF[min(child.restarts, len(RESTART_BACKOFF) - 1)]
        log.warning("%s exited (%s); restarting in %ss", child.name, exit_status(code), delay)
        time.sleep(delay)
        if self.stopping:  # SIGINT or SIGTERM during the wait: the owner stops everything instead
            return
        child.restarts += 1
        child.start()
        log.info("%s restarted (pid %s)", child.name, child.process.pid if child.process else "none")

    def stop(self) -> None:
        """Stop every child, last started first."""
        self.stopping = True
        for child in reversed(self.children):
            child.stop()

    def _on_signal(self, signum: int, _frame) -> None:
        self.stopping = True


def exit_status(code: int) -> str:
    """How a process ended, in words: its exit code, or the signal that killed it."""
    if code >= 0:
        return f"code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def service_argv(*args: str) -> list[str]:
    """The command that runs one claimlog service with this interpreter."""
    return [sys.executable, "-m", "services.cli", *args]


def child_env(nats_url: str) -> dict[str, str]:
    """A child's environment: the parent's, pointed at the NATS server with the child's own credentials."""
    return {**os.environ, "CLAIMLOG_NATS_URL": nats_url}
