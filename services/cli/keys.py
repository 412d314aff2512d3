"""``claimlog actors key add/rotate/list/require``: the Ed25519 keys events are signed with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from events import ActorKind
from services.cli.actors import _actor, _run, actors_app
from services.identity.keys import KeyRegistryError, KeyRing
from services.log.signing import Signer

key_app = typer.Typer(help="Signing keys: the API's (a delegate) and each direct producer's (public halves kept in the registry).",
                      no_args_is_help=True)
out = Console()
err = Console(stderr=True)

OutOption = Annotated[Path, typer.Option("--out", help="Where to write the private key (PEM, owner-only); must not exist.")]


def register(app: typer.Typer) -> None:
    """Add the ``key`` group under ``claimlog actors``."""
    actors_app.add_typer(key_app, name="key")


def _write_private(path: Path, signer: Signer) -> None:
    """The private key, made owner-only from its first byte; an existing file is never overwritten."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise typer.BadParameter(f"{path} exists: a signing key is never overwritten; name a new file", param_hint="--out") from None
    except OSError as error:
        raise typer.BadParameter(f"cannot write {path}: {error.strerror}", param_hint="--out") from None
    with os.fdopen(fd, "wb") as file:
        file.write(signer.pem())


def _checked_out(path: Path) -> Path:
    if path.exists():
        raise typer.BadParameter(f"{path} exists: a signing key is never overwritten; name a new file", param_hint="--out")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"{path.parent} is not a directory", param_hint="--out")
    return path


@key_app.command("add")
def add(
    actor_id: Annotated[str, typer.Argument(help="Whose key: the API's service actor (with --delegate) or a direct producer.")],
    out_path: OutOption,
    kind: Annotated[ActorKind, typer.Option(help="Who the actor is.")] = ActorKind.SERVICE,
    model: Annotated[str | None, typer.Option(help="The model's name and version, for kind model.")] = None,
    delegate: Annotated[bool, typer.Option(help="The key signs for the actors the API authenticates (the API's key).")] = False,
) -> None:
    """Make a key pair: the private key goes to --out (only there), the public key into the registry."""
    actor = _actor(actor_id, kind, model)
    _checked_out(out_path)
    signer = Signer.generate()

    async def work(log):
        ring = await KeyRing.open(log.nc, replicas=log.spec.replicas, stream=log.stream, layout=log.layout)
        return await ring.add(actor, delegate=delegate, signer=signer)

    try:
        _, record = _run(work)
    except KeyRegistryError as error:
        raise typer.BadParameter(str(error), param_hint="ACTOR_ID") from None
    _write_private(out_path, signer)
    err.print(f"key {record.key_id} of {actor.kind.value} [bold]{actor.id}[/bold]{' (delegate)' if delegate else ''}; "
              f"private key in {out_path}: set CLAIMLOG_SIGNING_KEY={out_path} where it signs")
    typer.echo(record.key_id)


@key_app.command("rotate")
def rotate(
    actor_id: Annotated[str, typer.Argument(help="Whose key to replace.")],
    out_path: OutOption,
) -> None:
    """Make a new key for an actor and retire its current one after the log's head: events stored up to it keep verifying with the old."""
    _checked_out(out_path)

    async def work(log):
        ring = await KeyRing.open(log.nc, replicas=log.spec.replicas, stream=log.stream, layout=log.layout)
        return await ring.rotate(actor_id, after_seq=await log.head())

    try:
        signer, record, retired = _run(work)
    except KeyRegistryError as error:
        raise typer.BadParameter(str(error), param_hint="ACTOR_ID") from None
    _write_private(out_path, signer)
    err.print(f"key {record.key_id} of [bold]{actor_id}[/bold] in {out_path}; retired {', '.join(r.key_id for r in retired)}: "
              "point CLAIMLOG_SIGNING_KEY at the new file and restart what signs with it")
    typer.echo(record.key_id)


@key_app.command("list")
def list_keys() -> None:
    """Every key ever added: whose, whether a delegate, when added and retired; and the signing requirement."""

    async def work(log):
        ring = await KeyRing.maybe_open(log.nc, stream=log.stream, layout=log.layout)
        return ([], None) if ring is None else (await ring.records(), await ring.requirement())

    records, required = _run(work)
    table = Table("key", "actor", "kind", "delegate", "added", "retired")
    for record in records:
        table.add_row(record.key_id, record.actor.id, record.actor.kind.value, "yes" if record.delegate else "",
                      f"{record.added_at:%Y-%m-%d %H:%M:%S}Z", f"{record.retired_at:%Y-%m-%d %H:%M:%S}Z" if record.retired_at else "")
    out.print(table)
    out.print("signatures required after sequence " + str(required) if required is not None else "signatures not required yet")


@key_app.command("require")
def require(
    after: Annotated[int | None, typer.Option(min=0, help="The last sequence that may stay unsigned (default: the log's head now).")] = None,
) -> None:
    """Require a signature on every event stored from now on (set once; events before stay readable as unsigned)."""

    async def work(log):
        ring = await KeyRing.open(log.nc, replicas=log.spec.replicas, stream=log.stream, layout=log.layout)
        return await ring.require(await log.head() if after is None else after)

    try:
        document = _run(work)
    except KeyRegistryError as error:
        raise typer.BadParameter(str(error)) from None
    err.print(f"every event after sequence {document.required_after} must be signed")
