"""``claimlog tlog``: the transparency log's integrator, its key and its origin."""

from __future__ import annotations

from pathlib import Path
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


@tlog_app.command("new-identity")
def new_identity(
    origin: Annotated[str, typer.Option(help="The new log's origin (and key name): scheme-less, never used before.")],
    checkpoint: Annotated[list[Path], typer.Option(
        help="A copy of the previous log's checkpoint (a signed note: a mirror's, an auditor's); repeatable. The "
        "stored one and what the configured witnesses hold are read too, and the largest is named.")] = [],  # noqa: B006
) -> None:
    """Start a new log (new origin and key) over the whole stream, when the tree cannot go on (a restore
    older than the last published checkpoint, a rewritten stream). Run it with the registry stopped; its
    entry 0 names the previous log's last checkpoint."""
    from services.runtime.from_settings import open_log, run
    from services.tlog.identity import IdentityRefused, start_new_identity
    from services.tlog.keys import key_path
    from services.tlog.witnesses import parse_witnesses

    settings = setup()
    notes = []
    for path in checkpoint:
        try:
            notes.append((str(path), path.read_text()))
        except (OSError, UnicodeDecodeError) as error:
            raise typer.BadParameter(f"{path}: {error}", param_hint="--checkpoint") from None

    async def start():
        from services.log.tlog_store import TlogStore

        async with open_log(settings, client_name="claimlog-tlog-identity", role="admin") as claim_log:
            store = await TlogStore.open(claim_log.nc, claim_log.stream, create=False)
            witnesses = parse_witnesses(settings.tlog_witnesses) if settings.tlog_witnesses else []
            return await start_new_identity(claim_log.nc, store, key_path(settings.data_dir, settings.stream), origin,
                                            notes=notes, witnesses=witnesses)

    try:
        made = run(start())
    except IdentityRefused as refused:
        out.print(f"[red]no new log identity[/red]: {refused}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    before = made.predecessor
    out.print(f"new log {made.record.origin}: {made.signer.vkey()}", highlight=False, soft_wrap=True)
    out.print(f"its entry 0 names {before.origin} at size {before.size} (from {', '.join(made.sources)}); "
              "give every witness and auditor the new verifier key", highlight=False, soft_wrap=True)
