"""``claimlog up``, ``claimlog projector`` and ``claimlog api``: running the services."""

from __future__ import annotations

from typing import Annotated

import typer

from services.cli.setup import setup
from services.runtime.from_settings import run, tune_gc
from services.runtime.settings import Settings


def register(app: typer.Typer) -> None:
    """Add ``up``, ``projector`` and ``api`` to the ``claimlog`` command."""
    app.command("up")(up)
    app.command("projector")(projector)
    app.command("api")(api)


def up(
    sample: Annotated[bool, typer.Option(help="Also ingest the sample registry pages.")] = False,
    host: Annotated[str | None, typer.Option(help="Read API host (default CLAIMLOG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="Read API port (default CLAIMLOG_API_PORT).")] = None,
    cluster: Annotated[
        int | None,
        typer.Option(min=3, max=5, help="Run a JetStream cluster of this many nats-servers on loopback instead of one."),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, max=64, help="Projector worker processes dividing the log's partitions (a partitioned log only)."),
    ] = 1,
    witness: Annotated[bool, typer.Option(
        help="Also run a witness of the transparency log in the data directory, which cosigns each checkpoint: it "
        "shows the protocol end to end, and assures nobody (whoever runs the registry holds its key)."
    )] = False,
) -> None:
    """Run everything: NATS (embedded unless CLAIMLOG_NATS_URL), migrations, projector, transparency log and read API."""
    from services.orchestration.up import run_up

    settings = setup()
    host, port = host or settings.api_host, port or settings.api_port
    raise typer.Exit(run_up(settings, sample=sample, host=host, port=port, cluster=cluster, workers=workers, witness=witness))


def projector() -> None:
    """Run the projector alone: fold the log into the read models until stopped."""
    from services.orchestration.projector_process import run_projector

    run(run_projector(setup()))


def api(
    host: Annotated[str | None, typer.Option(help="Host to bind (default CLAIMLOG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(min=0, max=65535, help="Port to bind (default CLAIMLOG_API_PORT).")] = None,
    read_only: Annotated[bool, typer.Option(help="Serve reads only: no commands; connected to NATS as the reader role.")] = False,
) -> None:
    """Run the HTTP API alone: reads, and commands (which connect to NATS as the writer)."""
    import uvicorn

    from services.http.server import build_app
    from services.runtime.db import require_current
    from services.store.generations import Generations

    settings = setup()
    generations = Generations(settings.resolved_database_url())
    require_current(generations.home)
    if settings.nats_url:  # a server that is down or refuses the credentials: one line now, not uvicorn's traceback later
        run(_reach_nats(settings))
    app = build_app(settings, generations, commands=not read_only)
    tune_gc()  # uvicorn runs its own loop, not through services.runtime.from_settings.run: without it, long GC pauses
    uvicorn.run(app, host=host or settings.api_host, port=port or settings.api_port, log_level="warning")


async def _reach_nats(settings: Settings) -> None:
    from services.log import connect
    from services.runtime.from_settings import nats_tls

    nc = await connect(
        settings.nats_url, name="claimlog-api-check", first_connect_seconds=settings.nats_connect_seconds, tls=nats_tls(settings)
    )
    await nc.close()
