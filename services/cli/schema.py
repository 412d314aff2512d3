"""``claimlog schema export``: the JSON Schemas of events and commands, and the AsyncAPI document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from services.cli.setup import console

schema_app = typer.Typer(help="The published event contract.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``schema`` group to the ``claimlog`` command."""
    app.add_typer(schema_app, name="schema")


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
