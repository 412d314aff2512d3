"""``claimlog ingest``: publish registry pages, or commands from JSON Lines."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.setup import console, setup
from services.runtime.from_settings import run


def register(app: typer.Typer) -> None:
    """Add ``ingest`` to the ``claimlog`` command."""
    app.command("ingest")(ingest)


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

    settings = setup("WARNING")
    files = list(paths or []) + (sample_pages() if sample else [])
    if not files:
        raise typer.BadParameter("name at least one page file or .jsonl file, or use --sample")
    command_files = [f for f in files if f.suffix == ".jsonl"]
    pages = [f for f in files if f.suffix != ".jsonl"]
    code = run(ingest_files(settings, pages, console)) if pages else 0
    for path in command_files:
        code = max(code, run(ingest_commands(settings, path, token, console, report_path=report, window=window)))
    raise typer.Exit(code)
