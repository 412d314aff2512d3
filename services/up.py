"""``claimlog up``: start NATS (embedded by default), migrate, supervise the projector and read API."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import httpx
from rich.console import Console
from rich.panel import Panel
from sqlalchemy.engine import make_url

from services.embedded import EmbeddedNats, EmbeddedNatsError, running_url
from services.generations import Generations
from services.ingest.cli import ingest_files
from services.ingest.pages import sample_pages
from services.log.servers import redact
from services.nats_roles import USERS_FILE
from services.runtime import ensure_log
from services.settings import Settings
from services.supervisor import Child, Supervisor, child_env, service_argv

log = logging.getLogger(__name__)
console = Console()


def run_up(settings: Settings, *, sample: bool, host: str, port: int) -> int:
    """Run claimlog until SIGINT or SIGTERM; returns the exit code."""
    if not _port_free(host, port):
        console.print(f"[red]{host}:{port} is already in use[/red]: stop what listens there, or pass --port")
        return 2
    embedded = None
    if settings.nats_url is None and running_url(settings.data_dir) is None:
        embedded = EmbeddedNats(settings.data_dir, sync=settings.nats_sync, stream=settings.stream)
        embedded.start()
    supervisor = None
    try:
        generations = Generations(settings.resolved_database_url())
        generations.upgrade()
        generations.close()
        asyncio.run(ensure_log(settings))
        children = [
            Child("projector", service_argv("projector"), child_env(role_url(settings, "projector"))),
            Child("api", service_argv("api", "--host", host, "--port", str(port)), child_env(role_url(settings, "writer"))),
        ]
        supervisor = Supervisor(children)
        supervisor.start()
        base = f"http://{host}:{port}"
        _wait_healthy(base, supervisor)
        if sample and not supervisor.stopping:
            asyncio.run(ingest_files(as_role(settings, "writer"), sample_pages(), console))
        _announce(settings, base, embedded is not None)
        supervisor.watch()
        return 0
    finally:
        if supervisor is not None:
            supervisor.stop()
        if embedded is not None:
            embedded.stop()
        console.print("claimlog stopped")


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def role_url(settings: Settings, role: str) -> str:
    """CLAIMLOG_NATS_URL as the operator gave it, else ``role``'s URL on the data directory's embedded server."""
    url = settings.nats_url or running_url(settings.data_dir, role)
    if url is None:
        raise EmbeddedNatsError(f"the embedded nats-server of {settings.data_dir} is not running")
    return url


def as_role(settings: Settings, role: str) -> Settings:
    """The settings, pointed at NATS with ``role``'s credentials."""
    return settings.model_copy(update={"nats_url": role_url(settings, role)})


def _wait_healthy(base: str, supervisor: Supervisor, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not supervisor.stopping:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    if not supervisor.stopping:
        raise RuntimeError(f"the read API did not answer on {base}/health within {timeout}s")


def _announce(settings: Settings, base: str, embedded: bool) -> None:
    where = "embedded nats-server" if embedded else "NATS"
    users = "" if settings.nats_url else f"NATS users {(settings.data_dir / USERS_FILE).resolve()}\n"
    console.print(
        Panel.fit(
            f"HTTP API   {base}  (docs: {base}/docs, events: {base}/asyncapi)\n"
            f"a claim    {base}/claims/CLM-0338\n"
            f"to write   claimlog actors add NAME --kind person  (prints a bearer token)\n"
            f"log        {where} at {redact(role_url(settings, 'admin'))}\n"
            f"stream     {settings.stream}\n"
            f"{users}"
            f"database   {make_url(settings.resolved_database_url()).render_as_string(hide_password=True)}\n"
            f"data dir   {settings.data_dir.resolve()}\n\n"
            "Ctrl-C stops everything.",
            title="claimlog is up",
        )
    )
