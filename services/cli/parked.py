"""``claimlog parked`` and ``claimlog parked retry``: the events held back behind a poison event, and applying them after a fix."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from services.cli.setup import command_settings
from services.projector.parking import parked_rows
from services.projector.retry import retry_parked
from services.runtime.from_settings import open_log, run
from services.runtime.settings import Settings
from services.store.generations import Generations

parked_app = typer.Typer(help="Events held back behind a poison event.", invoke_without_command=True)
console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add the ``parked`` group to the ``claimlog`` command."""
    app.add_typer(parked_app, name="parked")


@parked_app.callback()
def parked(
    ctx: typer.Context,
    claim: Annotated[str | None, typer.Option(help="Only this claim's parked events.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 1000,
) -> None:
    """Parked events in log order (sequence, claim, type, reason); exits 1 when there are any."""
    if ctx.invoked_subcommand is not None:
        return
    generations = Generations(command_settings().resolved_database_url())
    try:
        with generations.active()[1].connect() as conn:
            rows = parked_rows(conn, claim_id=claim, limit=limit)
    finally:
        generations.close()
    table = Table("seq", "claim", "type", "reason", "parked at", title=f"{len(rows)} parked event(s)")
    for row in rows:
        table.add_row(str(row["seq"]), row["claim_id"], row["event_type"], row["reason"], row["parked_at"].isoformat(timespec="seconds"))
    Console().print(table)
    raise typer.Exit(1 if rows else 0)


@parked_app.command("retry")
def retry(claim: Annotated[str | None, typer.Argument(help="The claim to retry (default: every parked claim).")] = None) -> None:
    """Apply parked events in log order through the projections (after the fix is deployed), one transaction
    per claim, and unpark them; a claim whose event still fails is left as it was. Exits 1 if any still fails."""
    settings = command_settings()
    generations = Generations(settings.resolved_database_url())
    try:
        results = run(_retry(settings, generations.active()[1], claim))
    finally:
        generations.close()
    if not results:
        console.print(f"no parked events{f' of {claim}' if claim else ''}")
    for result in results:
        if result.failed_seq is None:
            console.print(f"{result.claim_id}: applied {result.applied} parked event(s) in order; unparked")
        else:
            console.print(
                f"[red]{result.claim_id}: sequence {result.failed_seq} still fails ({result.reason}); "
                "nothing applied, every parked event stays[/red]"
            )
    raise typer.Exit(1 if any(r.failed_seq is not None for r in results) else 0)


async def _retry(settings: Settings, engine, claim: str | None):
    async with open_log(settings, client_name="claimlog-parked", role="projector") as claim_log:
        return await retry_parked(claim_log, engine, claim)
