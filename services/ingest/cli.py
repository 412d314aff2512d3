"""The terminal side of ``claimlog ingest``: progress, errors with file and line, a closing report."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from services.ingest.page_format import PageFormatError
from services.ingest.pages import PageOutcome, import_page, read_page
from services.runtime import open_log
from services.settings import Settings


async def ingest_files(settings: Settings, files: list[Path], console: Console) -> int:
    """Import the files; returns the exit code (1 when any page was refused)."""
    outcomes: list[PageOutcome] = []
    pages = []
    for path in files:
        try:
            pages.append(read_page(path))
        except PageFormatError as error:
            outcomes.append(PageOutcome(str(path), None, 0, error=str(error)))
    async with open_log(settings, client_name="claimlog-ingest") as claim_log:
        with Progress(
            TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(), console=console,
        ) as progress:
            task = progress.add_task("pages", total=len(pages), rate="")
            for page in pages:
                outcomes.append(await import_page(claim_log, page))
                speed = progress.tasks[0].speed
                progress.update(task, advance=1, rate=f"{speed:.0f} pages/s" if speed else "")
    return _report(outcomes, console)


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
    )
    return 1 if failed else 0
