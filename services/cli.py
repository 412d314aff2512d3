"""The ``claimlog`` command: run the services, ingest pages, migrate, export the event schemas."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from services.actors_cli import actors_app
from services.audit_io_cli import register as register_audit
from services.parked_cli import parked_app
from services.replay_cli import replay
from services.runtime import run, tune_gc
from services.settings import Settings
from services.status_cli import register as register_status
from services.timeline_cli import register as register_timeline

app = typer.Typer(help="claimlog: the event-sourced registry of research claims.", no_args_is_help=True)
db_app = typer.Typer(help="The read-model database.", no_args_is_help=True)
schema_app = typer.Typer(help="The published event contract.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(schema_app, name="schema")
app.add_typer(actors_app, name="actors")
app.add_typer(parked_app, name="parked")
register_audit(app)  # verify, export, import
app.command()(replay)
register_timeline(app)  # show, history
register_status(app)
console = Console(stderr=True)


def _setup(level: str = "INFO") -> Settings:
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(console=console, show_path=False)])
    for chatty in ("alembic", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    return Settings()


@app.command()
def up(
    sample: Annotated[bool, typer.Option(help="Also ingest the sample registry pages.")] = False,
    host: Annotated[str | None, typer.Option(help="Read API host (default CLAIMLOG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Read API port (default CLAIMLOG_API_PORT).")] = None,
    cluster: Annotated[
        int | None,
        typer.Option(min=3, max=5, help="Run a JetStream cluster of this many nats-servers on loopback instead of one."),
    ] = None,
) -> None:
    """Run everything: NATS (embedded unless CLAIMLOG_NATS_URL), migrations, projector and read API."""
    from services.up import run_up

    settings = _setup()
    host, port = host or settings.api_host, port or settings.api_port
    raise typer.Exit(run_up(settings, sample=sample, host=host, port=port, cluster=cluster))


@app.command()
def projector() -> None:
    """Run the projector alone: fold the log into the read models until stopped."""
    from services.projector.main import run_projector

    run(run_projector(_setup()))


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Host to bind (default CLAIMLOG_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind (default CLAIMLOG_API_PORT).")] = None,
    read_only: Annotated[bool, typer.Option(help="Serve reads only: no commands, no NATS connection.")] = False,
) -> None:
    """Run the HTTP API alone: reads, and commands (which connect to NATS as the writer)."""
    import uvicorn

    from services.db import require_current
    from services.generations import Generations
    from services.read_api.server import build_app

    settings = _setup()
    generations = Generations(settings.resolved_database_url())
    require_current(generations.home)
    if settings.nats_url:  # a server that is down or refuses the credentials: one line now, not uvicorn's traceback later
        run(_reach_nats(settings))
    app = build_app(settings, generations, commands=not read_only)
    tune_gc()  # uvicorn runs its own loop, not through services.runtime.run: without it, long GC pauses
    uvicorn.run(app, host=host or settings.api_host, port=port or settings.api_port, log_level="warning")


async def _reach_nats(settings: Settings) -> None:
    from services.log import connect

    nc = await connect(settings.nats_url, name="claimlog-api-check", first_connect_seconds=settings.nats_connect_seconds)
    await nc.close()


@app.command()
def ingest(
    paths: Annotated[list[Path] | None, typer.Argument(help="Registry pages (text), or JSON Lines of commands (*.jsonl).")] = None,
    sample: Annotated[bool, typer.Option(help="Ingest the sample pages shipped with claimlog.")] = False,
    token: Annotated[
        str | None, typer.Option(envvar="CLAIMLOG_TOKEN", help="Bearer token of the actor writing JSON Lines commands.")
    ] = None,
    report: Annotated[Path | None, typer.Option(help="Write the JSON Lines report (every rejected line) here.")] = None,
    window: Annotated[int, typer.Option(min=1, max=4096, help="Appends in flight at once (JSON Lines).")] = 512,
) -> None:
    """Publish events: registry pages (what the log lacks of each), or commands from JSON Lines.

    Running the same input again publishes nothing new.
    """
    from services.ingest.cli import ingest_commands, ingest_files
    from services.ingest.pages import sample_pages

    settings = _setup("WARNING")
    files = list(paths or []) + (sample_pages() if sample else [])
    if not files:
        raise typer.BadParameter("name at least one page file or .jsonl file, or use --sample")
    command_files = [f for f in files if f.suffix == ".jsonl"]
    pages = [f for f in files if f.suffix != ".jsonl"]
    code = run(ingest_files(settings, pages, console)) if pages else 0
    for path in command_files:
        code = max(code, run(ingest_commands(settings, path, token, console, report_path=report, window=window)))
    raise typer.Exit(code)


@app.command()
def unreadable(
    after: Annotated[int, typer.Option(help="Only events after this log sequence.")] = 0,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 100,
) -> None:
    """Events in the log the projections could not read (skipped, with the reason); exits 1 when there are any."""
    from rich.table import Table

    from services.db import make_engine
    from services.read_api.queries import unreadable as unreadable_rows

    settings = _setup("WARNING")
    engine = make_engine(settings.resolved_database_url(), create=False)
    with engine.connect() as conn:
        rows = unreadable_rows(conn, after=after, limit=limit)
    table = Table("seq", "subject", "reason", title=f"{len(rows)} unreadable event(s)")
    for row in rows:
        table.add_row(str(row["seq"]), row["subject"], row["reason"])
    Console().print(table)
    raise typer.Exit(1 if rows else 0)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Migrate the read-model schema (Alembic)."""
    from services.db import upgrade
    from services.generations import Generations

    settings = _setup()
    generations = Generations(settings.resolved_database_url())
    if revision == "head":
        migrated = generations.upgrade()
    else:
        upgrade(generations.home, revision)
        migrated = [0]
    where = generations.home.url.render_as_string(hide_password=True)
    console.print(f"database at {where} is at revision {revision} (read-model generations {migrated})")


@schema_app.command("export")
def schema_export(
    out: Annotated[Path, typer.Option(help="Directory to write the schemas into (events/ and commands/ below it).")] = Path("schemas"),
) -> None:
    """Write the JSON Schemas of every event and command, and the AsyncAPI document, for producers in any language."""
    from events.schema import event_schemas
    from services.asyncapi import asyncapi_document
    from services.commands.models import command_schemas

    for kind, schemas in (("events", event_schemas()), ("commands", command_schemas())):
        folder = out / kind
        folder.mkdir(parents=True, exist_ok=True)
        for name, schema in schemas.items():
            (folder / f"{name}.json").write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n")
        console.print(f"wrote {len(schemas)} {kind} schemas to {folder}")
    (out / "asyncapi.json").write_text(json.dumps(asyncapi_document(), indent=2, sort_keys=True) + "\n")
    console.print(f"wrote the AsyncAPI document of the claim subjects to {out / 'asyncapi.json'}")


def main() -> None:
    """Entry point of the ``claimlog`` script: an error a user can act on is one message and exit code 2
    (the command could not run, as for bad arguments), apart from the 1 of commands that report findings."""
    from services.cli_errors import explain

    try:
        app()
    except Exception as error:
        message = explain(error)
        if message is None:
            raise  # a bug: its traceback is what helps
        console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
