"""``claimlog tlog``: the transparency log's integrator, its key and its origin."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from services.cli.setup import setup

tlog_app = typer.Typer(help="The transparency log over the claim log (docs/transparency.md).", no_args_is_help=True)
out = Console()


def register(app: typer.Typer) -> None:
    """Add the ``tlog`` group to the ``claimlog`` command."""
    app.add_typer(tlog_app, name="tlog")


@tlog_app.command("integrate")
def integrate() -> None:
    """Sequence every stored message into the transparency log and sign checkpoints, until stopped."""
    from services.runtime.from_settings import run
    from services.tlog.integrator import Refused
    from services.tlog.process import run_integrator

    settings = setup()
    try:
        run(run_integrator(settings))
    except Refused as refused:
        out.print(f"[red]the transparency log stops[/red]: {refused}")
        raise typer.Exit(3) from None


@tlog_app.command("init")
def init(
    origin: Annotated[str, typer.Option(help="The log's origin (and key name): scheme-less, e.g. registry.example.org/claims.")],
) -> None:
    """Make the log key with its origin, before the tree exists (``claimlog up`` makes a unique local one otherwise)."""
    from services.tlog.keys import LogKeyError, create_signer, key_path

    settings = setup()
    try:
        signer = create_signer(key_path(settings.data_dir, settings.stream), origin)
    except (LogKeyError, ValueError) as error:
        raise typer.BadParameter(str(error), param_hint="--origin") from None
    out.print(signer.vkey(), highlight=False, soft_wrap=True)


@tlog_app.command("vkey")
def vkey() -> None:
    """Print the log's verifier key (``<origin>+<key id>+<base64 key>``), from the data directory's log key."""
    from services.tlog.keys import key_path, load_signer

    settings = setup()
    path = key_path(settings.data_dir, settings.stream)
    signer = load_signer(path)
    if signer is None:
        raise typer.BadParameter(f"no log key at {path}: `claimlog up` (or `claimlog tlog init`) makes it", param_hint="CLAIMLOG_DATA_DIR")
    out.print(signer.vkey(), highlight=False, soft_wrap=True)
