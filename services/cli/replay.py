"""``claimlog replay``: rebuild the read models into a new generation while the site keeps serving, then switch."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from services.cli.setup import command_settings
from services.rebuild.diff import Diff
from services.rebuild.replay import rebuild_generation
from services.rebuild.some import chosen_projections
from services.runtime.from_settings import run
from services.runtime.settings import Settings
from services.store.generations import Generations

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``replay`` to the ``claimlog`` command."""
    app.command("replay")(replay)


def replay(
    switch: Annotated[bool, typer.Option(help="Switch the API and projector to the new tables once they have caught up.")] = True,
    diff: Annotated[bool, typer.Option(help="Before switching, report how the new tables differ from the active ones.")] = False,
    drop_old: Annotated[bool, typer.Option("--drop-old", help="Rebuild nothing: drop the tables of retired generations.")] = False,
    status: Annotated[bool, typer.Option("--status", help="Rebuild nothing: list the read-model generations.")] = False,
    projection: Annotated[list[str] | None, typer.Option(
        "--projection", help="Rebuild only this projection (repeatable); the others' tables are copied from the active generation.",
    )] = None,
) -> None:
    """Rebuild every projection (or those named) from the first event into new tables, while the live API
    serves the old ones; when the new tables have caught up with the log, switch to them in one transaction.

    The old tables stay (retired) until `claimlog replay --drop-old`.
    """
    if projection:
        try:
            chosen_projections(projection)
        except ValueError as error:
            raise typer.BadParameter(str(error), param_hint="--projection") from None
    settings = command_settings()
    generations = Generations(settings.resolved_database_url())
    try:
        if status:
            _print_generations(generations)
            return
        if drop_old:
            dropped = generations.drop_retired()
            console.print(f"dropped generations {dropped}" if dropped else "no retired generation to drop")
            return
        _run_replay(settings, generations, switch=switch, diff=diff, projections=projection or None)
    finally:
        generations.close()


def _run_replay(settings: Settings, generations: Generations, *, switch: bool, diff: bool, projections: list[str] | None) -> None:
    started = time.perf_counter()
    with Progress(
        TextColumn("[bold]replay"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console,
    ) as bar:
        task = bar.add_task("replay", total=None, rate="")

        def progress(applied: int, head: int) -> None:
            elapsed = time.perf_counter() - started
            rate = f"{applied / elapsed:,.0f} events/s" if elapsed > 0 else ""
            bar.update(task, completed=applied, total=head, rate=rate)

        rebuilt = run(rebuild_generation(settings, generations, switch=switch, diff=diff, progress=progress, projections=projections))
    elapsed = time.perf_counter() - started
    console.print(
        f"generation {rebuilt.generation} built from the log through sequence {rebuilt.applied_through:,} "
        f"in {elapsed:.1f}s ({rebuilt.applied_through / max(elapsed, 1e-9):,.0f} events/s); "
        f"folded from the first event: {', '.join(rebuilt.folded)}"
    )
    if rebuilt.diff is not None:
        _print_diff(rebuilt.diff)
    if rebuilt.replaced is not None:
        console.print(
            f"[green]switched[/green]: the API and the projector now use generation {rebuilt.generation}; "
            f"generation {rebuilt.replaced} is retired (drop it with `claimlog replay --drop-old`)"
        )
    else:
        console.print(f"not switched: generation {rebuilt.generation} is built, the active one is unchanged")


def _print_diff(diff: Diff) -> None:
    if diff.empty:
        console.print(f"diff: the new tables equal the active ones (active at {diff.old_seq:,}, new at {diff.new_seq:,})")
        return
    console.print(f"diff (active at sequence {diff.old_seq:,}, new at {diff.new_seq:,}):")
    console.print(f"  tables whose checksums differ: {', '.join(diff.tables_differing) or 'none'}")
    table = Table("claim", "what differs")
    for claim_id, fields in diff.claims_changed:
        table.add_row(claim_id, ", ".join(fields))
    for claim_id in diff.claims_only_new:
        table.add_row(claim_id, "only in the new tables")
    for claim_id in diff.claims_only_old:
        table.add_row(claim_id, "only in the active tables")
    if table.row_count:
        console.print(table)


def _print_generations(generations: Generations) -> None:
    table = Table("generation", "state", "where", "created", "switched to", title="read-model generations")
    for g in generations.list():
        table.add_row(str(g.number), g.state, g.location, str(g.created_at)[:19], str(g.switched_at or "")[:19])
    Console().print(table)
