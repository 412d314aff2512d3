"""``claimlog actors add/list/revoke/rotate``: who may write, and their bearer tokens."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from events import Actor, ActorKind
from events.envelope import utc_now
from services.cli.errors import validation_problems
from services.cli.setup import setup
from services.identity.actors import ActorKindFixed, ActorStore, ActorsUnavailable, TokenRecord
from services.identity.expiry import BadExpiry, expiry, parse_duration, stamp

actors_app = typer.Typer(help="Actors who may write, and their bearer tokens (stored hashed).", no_args_is_help=True)
out = Console()
ACTOR_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")  # events.envelope.ActorId
ExpiresIn = Annotated[
    str | None, typer.Option("--expires-in", help="The token stops working after this long: 90d, 12h, 1d12h (s m h d w).")
]
Expires = Annotated[
    str | None, typer.Option("--expires", help="The token stops working at this time (ISO 8601 with a zone, e.g. 2027-03-01T00:00:00Z).")
]


def register(app: typer.Typer) -> None:
    """Add the ``actors`` group to the ``claimlog`` command."""
    app.add_typer(actors_app, name="actors")


def _run(work):
    from services.runtime.from_settings import open_log, run

    settings = setup("WARNING")

    async def main():
        async with open_log(settings, client_name="claimlog-actors", role="admin") as log:
            return await work(log)

    return run(main())


@actors_app.command("add")
def add(
    actor_id: Annotated[str, typer.Argument(help="The actor's id, as pages will show it (e.g. ada, ingest-bot).")],
    kind: Annotated[ActorKind, typer.Option(help="Who the actor is.")] = ActorKind.PERSON,
    model: Annotated[str | None, typer.Option(help="The model's name and version, for kind model.")] = None,
    expires_in: ExpiresIn = None,
    expires: Expires = None,
) -> None:
    """Add an actor (or another token for one) and print its bearer token, once; without an expiry it works until revoked."""
    actor = _actor(actor_id, kind, model)
    expires_at = _expiry(expires_in, expires)

    async def work(log):
        store = await ActorStore.open(log.nc, create=True, replicas=log.spec.replicas, stream=log.stream)
        try:
            return await store.issue(actor, expires_at=expires_at)
        except ActorKindFixed as error:
            return error

    issued = _run(work)
    if isinstance(issued, ActorKindFixed):
        raise typer.BadParameter(str(issued), param_hint="--kind")
    token, record = issued
    _show(token, record)


def _show(token: str, record: TokenRecord) -> None:
    """The new token alone on stdout (for scripts); whose it is and until when on stderr."""
    typer.echo(token)
    actor = record.actor
    until = f", expires {stamp(record.expires_at)}" if record.expires_at else ""
    Console(stderr=True).print(
        f"token {record.token_id} for {actor.kind.value} [bold]{escape(actor.id)}[/bold]"
        f"{f' ({escape(actor.model)})' if actor.model else ''}{until}: shown once, keep it secret"
    )


def _expiry(expires_in: str | None, expires: str | None) -> datetime | None:
    """When a new token stops working, or a usage error saying what to type."""
    try:
        return expiry(expires_in=expires_in, expires=expires, now=utc_now())
    except BadExpiry as error:
        raise typer.BadParameter(str(error), param_hint="--expires" if expires_in is None else "--expires-in") from None


def _actor(actor_id: str, kind: ActorKind, model: str | None) -> Actor:
    """The actor to add, or an error that says what to type instead."""
    if kind is ActorKind.MODEL and not model:
        raise typer.BadParameter(
            f"a model actor names its model: add --model with the model's name and version, e.g. "
            f"claimlog actors add {actor_id} --kind model --model 'drafter-llm 2026-01'", param_hint="--model")
    if kind is not ActorKind.MODEL and model:
        raise typer.BadParameter(
            f"only a model actor names a model: drop --model, or add --kind model if {actor_id} is a model",
            param_hint="--model")
    if not ACTOR_ID.fullmatch(actor_id):
        example = re.sub(r"[^A-Za-z0-9._@+-]+", "-", actor_id).strip("-._@+")[:128] or "ada"
        raise typer.BadParameter(
            f"{actor_id!r} cannot be an actor id: letters, digits and . _ @ + - only (no spaces), starting with a "
            f"letter or digit, at most 128 characters; e.g. claimlog actors add {example}", param_hint="ACTOR_ID")
    try:
        return Actor(id=actor_id, kind=kind, model=model)
    except ValidationError as error:
        raise typer.BadParameter(validation_problems(error), param_hint="ACTOR_ID") from None


@actors_app.command("list")
def list_actors() -> None:
    """Every token: its id, whose it is, when it was made, when it expires, whether it is revoked."""

    async def work(log):
        try:
            return await (await ActorStore.open(log.nc, stream=log.stream)).records()
        except ActorsUnavailable:
            return []

    table = Table("token", "actor", "kind", "model", "created", "expires", "revoked")
    now = utc_now()
    for _, record in _run(work):
        table.add_row(
            record.token_id,
            record.actor.id,
            record.actor.kind.value,
            record.actor.model or "",
            stamp(record.created_at),
            expires_label(record, now),
            stamp(record.revoked_at) if record.revoked_at else "",
        )
    out.print(table)


def expires_label(record: TokenRecord, now: datetime) -> str:
    """A token's expiry as ``actors list`` shows it: ``never``, the time, or the time and ``expired``."""
    if record.expires_at is None:
        return "never"
    return f"{stamp(record.expires_at)} (expired)" if record.expired(now) else stamp(record.expires_at)


@actors_app.command("revoke")
def revoke(
    actor_id: Annotated[str | None, typer.Argument(help="Revoke every token of this actor.")] = None,
    token: Annotated[str | None, typer.Option(help="Revoke one token by its id (from `actors list`).")] = None,
) -> None:
    """Revoke an actor's tokens (or one token); they stop working at the next request."""
    if actor_id is not None and token is not None:
        raise typer.BadParameter(f"name an actor or one token, not both: claimlog actors revoke {actor_id} revokes "
                                 f"every token of {actor_id}, claimlog actors revoke --token {token} only that one")
    if actor_id is None and token is None:
        raise typer.BadParameter("name whose tokens to revoke (claimlog actors revoke ada), or one token "
                                 "(claimlog actors revoke --token TOKEN_ID; claimlog actors list shows them)")

    async def work(log):
        return await (await ActorStore.open(log.nc, stream=log.stream)).revoke(actor_id=actor_id, token_id=token)

    revoked = _run(work)
    if not revoked:
        which = f"no live token of {actor_id}" if actor_id else f"no live token {token}"
        Console(stderr=True).print(f"[red]{escape(which)}: claimlog actors list shows every token, whose it is and "
                                   "whether it is revoked[/red]")
        raise typer.Exit(1)
    Console(stderr=True).print(f"revoked {len(revoked)} token(s): {', '.join(r.token_id for r in revoked)}")


@actors_app.command("rotate")
def rotate(
    actor_id: Annotated[str, typer.Argument(help="The actor whose tokens to replace.")],
    expires_in: ExpiresIn = None,
    expires: Expires = None,
    grace: Annotated[
        str, typer.Option(help="How long the old tokens keep working: 1h, 30m, 1d (default 0: revoked at once).")
    ] = "0",
) -> None:
    """Issue a new token for an actor (same kind and model), print it once, and end its old tokens after --grace."""
    expires_at = _expiry(expires_in, expires)
    try:
        overlap = parse_duration(grace, option="--grace", zero=True)
    except BadExpiry as error:
        raise typer.BadParameter(str(error), param_hint="--grace") from None

    async def work(log):
        return await (await ActorStore.open(log.nc, stream=log.stream)).rotate(actor_id, expires_at=expires_at, grace=overlap)

    token, record, old = _run(work)
    _show(token, record)
    ids = ", ".join(r.token_id for r in old)
    ends = [r.expires_at for r in old if r.expires_at is not None and r.revoked_at is None]
    if not old:
        Console(stderr=True).print("no old token was live any more: each was revoked or expired meanwhile")
    elif overlap and ends:
        Console(stderr=True).print(f"old token(s) {ids} stop working by {stamp(max(ends))} (grace {grace})")
    else:
        Console(stderr=True).print(f"old token(s) {ids} revoked")
