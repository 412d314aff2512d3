"""The ``claimlog`` command: one Typer app assembled from the sub-apps of this package.

Each module holds one group of commands and adds them with ``register(app)``; none imports this
``__init__`` back. Modules here may import ``events``, ``projections`` and any other part of ``services``;
nothing outside ``services/cli/`` imports them.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from services.cli import (
    actors,
    audit_io,
    auditor,
    backup,
    certs,
    db,
    ingest,
    keys,
    parked,
    replay,
    schema,
    serve,
    status,
    timeline,
    transparency,
    witness,
)
from services.cli.setup import console, settings_in_use
from services.cli.usage import ClaimlogGroup

app = typer.Typer(cls=ClaimlogGroup, help="claimlog: the event-sourced registry of research claims.", no_args_is_help=True)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"claimlog {version('claimlog')}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print claimlog's version and exit."
    ),
) -> None:
    """claimlog: the event-sourced registry of research claims."""


for commands in (audit_io, auditor, replay, timeline, status, serve, ingest, db, schema, actors, keys, parked, certs, backup, transparency, witness):
    commands.register(app)


def main() -> None:
    """Entry point of the ``claimlog`` script: an error a user can act on is one message and exit code 2
    (the command could not run, as for bad arguments), apart from the 1 of commands that report findings."""
    from services.cli.errors import explain

    try:
        app()
    except Exception as error:
        message = explain(error, settings_in_use())
        if message is None:
            raise  # a bug: its traceback is what helps
        console.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        raise SystemExit(2) from None
