"""The terminal side of ``claimlog ingest``: progress, errors with file and line, a closing report."""

from __future__ import annotations

import gc
import time
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from services.ingest.page_batches import import_pages
from services.ingest.page_format import PageFormatError, RegistryPage
from services.ingest.pages import PageOutcome, read_page
from services.runtime.from_settings import open_log
from services.runtime.settings import Settings


async def ingest_files(settings: Settings, files: list[Path], console: Console) -> int:
    """Import the files; returns the exit code (1 when any page was refused)."""
    outcomes: list[PageOutcome] = []
    pages = []
    for path in files:
        try:
            pages.append(read_page(path))
        except PageFormatError as error:
            outcomes.append(PageOutcome(str(path), None, 0, error=str(error)))
    if pages:  # with every page refused there is nothing to publish, and no bar of "0/0"
        outcomes.extend(await _import(settings, pages, console))
    return _report(outcomes, console)


async def _import(settings: Settings, pages: list[RegistryPage], console: Console) -> list[PageOutcome]:
    async with open_log(settings, client_name="claimlog-ingest", role="writer") as claim_log:
        with Progress(
            TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(), console=console,
        ) as progress:
            task = progress.add_task("pages", total=len(pages), rate="")
            advance = throttled_advance(progress, task, "pages")
            return await import_pages(claim_log, pages, on_page=lambda: advance(1))


def _report(outcomes: list[PageOutcome], console: Console) -> int:
    published = sum(o.published for o in outcomes)
    unchanged = [o for o in outcomes if o.error is None and o.published == 0]
    failed = [o for o in outcomes if o.error is not None]
    for outcome in outcomes:
        if outcome.error is None and outcome.published:
            console.print(f"{outcome.claim_id}: {outcome.published} events (log sequence {outcome.last_seq})")
    for outcome in failed:
        console.print(f"[red]refused[/red] {outcome.error}", highlight=False)
    console.print(
        f"{len(outcomes) - len(failed) - len(unchanged)} pages published ({published} events), "
        f"{len(unchanged)} already in the log, {len(failed)} refused"
        + ("; nothing of a refused page was published: correct it at the line named and ingest it again" if failed else "")
    )
    return 1 if failed else 0


async def ingest_commands(
    settings: Settings, path: Path, token: str | None, console: Console, *, report_path: Path | None = None, window: int = 512
) -> int:
    """Apply a JSON Lines file of commands as the token's actor; returns the exit code (1 when any line was rejected)."""
    from services.identity.actors import ActorStore, ActorsUnavailable, TokenExpired
    from services.ingest.bulk import BulkIngest
    from services.ingest.bulk_lines import count_lines, iter_commands, report_json

    if not token:
        console.print("[red]commands are written by an actor[/red]: pass --token (or set CLAIMLOG_TOKEN); see `claimlog actors add`")
        return 2
    async with open_log(settings, client_name="claimlog-ingest", role="writer") as claim_log:
        try:
            actor = await (await ActorStore.open(claim_log.nc, stream=claim_log.stream)).authenticate(token)
        except (ActorsUnavailable, TokenExpired) as error:
            actor, reason = None, str(error)
        else:
            reason = "the token is unknown or revoked"
        if actor is None:
            console.print(f"[red]refused[/red]: {reason}")
            return 2
        with Progress(
            TextColumn(f"[bold]{path.name}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=console,
        ) as progress:
            task = progress.add_task("commands", total=count_lines(path), rate="")
            advance = throttled_advance(progress, task, "commands")
            bulk = BulkIngest(claim_log, actor, window=window, on_line=advance, after_batch=freeze_survivors)
            report = await bulk.run(iter_commands(path))
    if report_path is not None:
        report_path.write_text(report_json(report) + "\n")
    for error in report.rejected[:20]:
        console.print(f"[red]line {error.number}[/red] {error.reason}: {error.message}", highlight=False)
    if len(report.rejected) > 20:
        console.print(f"... and {len(report.rejected) - 20} more rejected lines" + (f" (all in {report_path})" if report_path else " (--report FILE lists them all)"))
    console.print(
        f"{report.lines} lines: {report.accepted} accepted, {report.present} already present, "
        f"{len(report.rejected)} rejected; as {actor.kind.value} {actor.id}"
        + (f"; log sequence {report.last_seq}" if report.last_seq else "")
    )
    return 1 if report.rejected else 0


def freeze_survivors() -> None:
    """The bulk command's garbage-collection policy, applied after each acknowledged batch: what is alive
    then (the claims' states, the lines on their way, whatever else the process holds) is left out of
    every collection from here on.

    A young collection walks every object allocated since the last one and still alive; while the claim
    cache fills, that is its newest states, about 230 ns an object, several microseconds a line. They are
    freed as usual once nothing refers to them; only a reference cycle among them would outlive them.
    Process-wide, so the command decides it, not ``BulkIngest`` (docs/decisions/0100-bulk-line-assembly.md).
    """
    gc.freeze()


def throttled_advance(progress: Progress, task, unit: str, every: float = 0.1):
    """A callback advancing ``task`` that redraws at most every ``every`` seconds.

    Rich's ``Task.speed`` walks its samples on each call, and ``Progress.tasks`` copies the task list
    under a lock: per line, they cost more than the work. The callback counts for itself and asks
    Rich only when it redraws, or when the task completes.
    """
    total = next(t.total for t in progress.tasks if t.id == task) or 0
    pending, done, drawn_at = 0, 0, time.monotonic()

    def advance(count: int) -> None:
        nonlocal pending, done, drawn_at
        pending += count
        now = time.monotonic()
        if now - drawn_at >= every or done + pending >= total:
            progress.update(task, advance=pending)
            speed = next(t.speed for t in progress.tasks if t.id == task)
            progress.update(task, rate=f"{speed:,.0f} {unit}/s" if speed else "")
            done, pending, drawn_at = done + pending, 0, now

    return advance
