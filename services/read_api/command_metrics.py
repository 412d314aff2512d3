"""The command API's request metrics: a counter and a latency histogram, labelled by the route (one of
the command names, ``any`` for ``POST /commands``, ``unknown`` for any other path, so a caller cannot make
new label values up), filled by ASGI middleware; ``GET /metrics`` (``metrics.py``) serves them."""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class CommandMetrics:
    """The command API's request counter and latency histogram, in a registry of the app's own."""

    def __init__(self, command_names: Iterable[str]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.labels = {f"/commands/{name}": name for name in command_names} | {"/commands": "any"}
        self.requests = Counter(
            "claimlog_command_requests", "Command requests answered, by command and HTTP status.",
            ["command", "status"], registry=self.registry,
        )
        self.latency = Histogram(
            "claimlog_command_request_duration_seconds", "Time to answer a command request, by command.",
            ["command"], registry=self.registry,
        )

    def observe(self, path: str, status: int, seconds: float) -> None:
        """Count one answered request under its route's label."""
        command = self.labels.get(path.rstrip("/") or "/", "unknown")
        self.requests.labels(command=command, status=str(status)).inc()
        self.latency.labels(command=command).observe(seconds)


class CommandTimer:
    """ASGI middleware timing every request under ``/commands`` until its answer is sent."""

    def __init__(self, app: ASGIApp, *, metrics: CommandMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/commands"):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app fails before answering

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            self.metrics.observe(scope["path"], status, time.perf_counter() - started)
