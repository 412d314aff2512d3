"""``claimlog audit URL``: check a registry's transparency log over HTTP, as any outsider can."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``audit`` to the ``claimlog`` command."""
    app.command("audit")(audit)


def audit(
    url: Annotated[str, typer.Argument(help="The registry's API, e.g. https://registry.example.org (its log is under /log/).")],
    key: Annotated[str | None, typer.Option(help="The log's verifier key; unset: the one pinned, or the served one pinned on first use.")] = None,
    witness: Annotated[list[str], typer.Option(help="A witness's verifier key whose cosignature is required; repeatable.")] = [],  # noqa: B006
    directory: Annotated[Path, typer.Option("--dir", help="Where the audits keep their mirrors.")] = Path(".claimlog-audit"),
    rate: Annotated[float, typer.Option(min=1, help="Requests per second at most.")] = 200.0,
    compare: Annotated[bool, typer.Option(
        "--compare", help="Also replay every entry through the log's admission and folds into a database of the audit's "
        "own, and compare each claim's page and the scorecard with what the registry serves as of the checkpoint."
    )] = False,
    sample: Annotated[int | None, typer.Option(min=1, help="With --compare: compare this many claims drawn at random, not every one.")] = None,
) -> None:
    """Verify the checkpoint and cosignatures, mirror the new tiles and entries, rebuild the tree from them;
    with --compare, replay the entries and compare the registry's pages with the replay's.

    Exit status: 0 all verified (and every page compared equal); 1 the log or a page is wrong (the evidence
    is named); 3 the pages could not be compared (other scorecard rules, or signatures the entries give no
    key for), the log itself verified."""
    from services.auditor.errors import AuditFailure, NotComparable
    from services.auditor.run import audit_directory, run_audit
    from services.runtime.from_settings import run

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.speed} /s"), TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("entries", total=None)
        phase = {"name": "entries"}

        def progress(done: int, total: int) -> None:
            if done < (bar.tasks[0].completed or 0) and phase["name"] == "entries":  # the comparison starts over from 0
                phase["name"] = "claims compared"
                bar.reset(task, description=phase["name"])
            bar.update(task, completed=done, total=total)

        try:
            report = run(run_audit(
                url, audit_directory(directory, url), key=key, witnesses=witness, per_second=rate,
                progress=progress, say=err.print, compare_pages=compare, sample=sample,
            ))
        except AuditFailure as failure:
            err.print(f"[red]audit failed[/red]: {failure}", highlight=False)
            raise typer.Exit(1) from None
        except NotComparable as reason:
            err.print(f"[yellow]pages not compared[/yellow]: {reason}", highlight=False)
            raise typer.Exit(3) from None
    checkpoint = report.checkpoint
    err.print(
        f"{checkpoint.origin}: size {checkpoint.size} verified (from {report.previous}; {report.entries_checked} entries "
        f"rehashed; {len(report.unreadable_entries)} not version-1 entries)",
        highlight=False,
    )
    if report.predecessor is not None:
        from tlog.note import b64

        before = report.predecessor
        err.print(f"{checkpoint.origin} succeeds {before.origin}: its entry 0 names that log's checkpoint of size {before.size} "
                  f"(root {b64(before.root)}), signed by that log's key; compare it with the last one you verified of that log",
                  highlight=False)
    comparison = report.comparison
    if comparison is None:
        return
    for difference in comparison.differences:
        err.print(f"[red]differs[/red]: {difference}", highlight=False)
    if comparison.not_replayable:
        err.print(f"{len(comparison.not_replayable)} entries hold only their body's digest (first: {comparison.not_replayable[0]}): "
                  "their claims' pages cannot be replayed from the entries", highlight=False)
    err.print(
        f"compared as of log sequence {comparison.size} under scorecard rules version {comparison.rules_version}: the scorecard and "
        f"{comparison.claims_compared} of {comparison.claims_in_log} claims' pages; {len(comparison.differences)} differ",
        highlight=False,
    )
    if comparison.differences:
        raise typer.Exit(1)
