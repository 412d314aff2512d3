"""The terminal side of ``claimlog verify``, ``claimlog export`` and ``claimlog import``: progress and reports."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from services.cli.errors import no_claim
from services.cli.setup import command_settings
from services.runtime.from_settings import open_log, run
from services.runtime.settings import Settings
from services.timeline.as_of import is_claim_id

# Messages are not wrapped at the console's width: a refusal names "file:line:" and the path, which a
# wrapped line splits where neither a tool nor a reader finds it (a terminal wraps long lines itself).
console = Console(stderr=True, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the audit commands to the ``claimlog`` command."""
    app.command("verify")(verify)
    app.command("export")(export)
    app.command("import")(import_)


def verify(
    skip_tables: Annotated[bool, typer.Option(help="Check the log only, not the read models against a replay.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check the whole log (no gaps, every event reads, every claim's hash chain holds) and the read models
    against a fresh replay; exits 1 on any finding."""
    from services.audit.verify import Report

    report = Report()
    run(_verify(command_settings(), report, tables=not skip_tables))
    if as_json:
        print(json.dumps(report.as_json(), indent=2))
    else:
        _print_report(report, Console())
    raise typer.Exit(0 if report.ok else 1)


async def _verify(settings: Settings, report, *, tables: bool) -> None:
    from services.audit.rebuild import compare_read_models
    from services.audit.verify import check_log

    # Replaying into scratch tables needs a consumer: the projector role may make one; reading does not.
    role = "projector" if tables else "reader"
    async with open_log(settings, client_name="claimlog-verify", role=role, create=False) as claim_log:
        head = await claim_log.head()
        with _progress() as progress:
            started = time.perf_counter()
            await check_log(claim_log, report, head=head, progress=_bar(progress, "log", head))
            report.log_seconds = round(time.perf_counter() - started, 3)
            if tables:
                generations, engine = _live_engine(settings)
                try:
                    await compare_read_models(claim_log, engine, report, progress=_bar(progress, "replay", head))
                finally:
                    generations.close()


def _live_engine(settings: Settings):
    """The engine of the read models the API serves (the active generation)."""
    from services.store.generations import Generations

    generations = Generations(settings.resolved_database_url())
    return generations, generations.active()[1]


def _print_report(report, out: Console) -> None:
    rate = f", {report.events / report.log_seconds:,.0f} events/s" if report.log_seconds else ""
    out.print(f"log: {report.events} events of {report.claims} claims, sequences {report.first_seq} to {report.last_seq}{rate}")
    if report.tables_at_seq is not None:
        out.print(f"read models compared with a fresh replay at sequence {report.tables_at_seq}")
    elif report.tables_note:
        out.print(f"read models: {report.tables_note}")
    if report.unsigned:
        out.print(f"{report.unsigned} event(s) stored before signatures were required carry none (unsigned, not forged)")
    if report.signed_after is None:
        out.print("signatures are not required yet (`claimlog actors key require`): unsigned events are not findings")
    if report.ok:
        out.print("[green]verified[/green]: no findings")
        return
    table = Table("kind", "seq", "claim / table", "subject", "finding", title=f"{sum(report.counts.values())} finding(s)")
    for f in report.findings:
        table.add_row(f.kind, str(f.seq or ""), f.claim_id or f.table or "", f.subject or "", f.message)
    out.print(table)
    hidden = sum(report.counts.values()) - len(report.findings)
    if hidden:
        out.print(f"... and {hidden} more ({dict(report.counts)})")


def export(
    claim: Annotated[str | None, typer.Option(help="Export only this claim's history (CLM-...).")] = None,
    out: Annotated[Path | None, typer.Option(help="Write here instead of standard output.")] = None,
) -> None:
    """Write the log, or one claim's history, as JSON Lines: seq, subject, stored time, hash and the exact event."""
    if claim is not None and not is_claim_id(claim):
        raise typer.BadParameter(f"{claim!r} is not a claim id: write it as CLM- and 4 to 12 digits, e.g. --claim CLM-0338",
                                 param_hint="--claim")
    code = run(_export(command_settings(), claim, out))
    raise typer.Exit(code)


async def _export(settings: Settings, claim: str | None, out: Path | None) -> int:
    from services.audit.export import export_log

    async with open_log(settings, client_name="claimlog-export", role="reader") as claim_log:
        head = await claim_log.head()
        target = out.open("w", encoding="utf-8") if out else sys.stdout
        try:
            with _progress() as progress:
                written = await export_log(claim_log, target, claim_id=claim, progress=_bar(progress, "export", head))
        finally:
            if out:
                target.close()
    if claim and not written:
        if out:
            out.unlink()  # an empty file would read as an export of a claim with no events
        console.print(f"[red]{escape(no_claim(claim))}: nothing exported[/red]")
        return 1
    console.print(f"exported {written} events{f' of {claim}' if claim else ''}{f' to {out}' if out else ''}")
    return 0


def import_(
    file: Annotated[Path, typer.Argument(help="A JSON Lines file written by `claimlog export`.", exists=True, dir_okay=False)],
    window: Annotated[int, typer.Option(min=1, max=4096, help="Events in flight at once.")] = 256,
) -> None:
    """Restore an export into an EMPTY stream, byte for byte, or continue one that stopped; checks the whole file first and publishes nothing if it is bad."""
    raise typer.Exit(run(_import(command_settings(), file, window)))


async def _import(settings: Settings, path: Path, window: int) -> int:
    from services.audit.export import ExportFileError, ImportRefused, import_file, resumable
    from services.audit.import_plan import plan_import
    from services.identity.keys import KeyRing
    from services.ingest.bulk_lines import count_lines
    from services.log import LogError

    async with open_log(settings, client_name="claimlog-import", role="admin") as claim_log:
        try:
            held = await resumable(claim_log, path, count=count_lines(path))
            says = (await plan_import(claim_log, path, held=held)).says()
            if says:  # before anything is stored
                console.print(f"[yellow]unsigned[/yellow]: {says}", highlight=False)
            with _progress() as progress:
                bar = _bar(progress, "import", count_lines(path))  # an event a line
                imported = await import_file(claim_log, path, window=window, progress=bar, held=held)
            await (await KeyRing.open(claim_log.nc, replicas=claim_log.spec.replicas, stream=claim_log.stream,
                                      layout=claim_log.layout)).sync()  # the key registry as the imported log's changes give it
        except (ExportFileError, ImportRefused) as error:
            console.print(f"[red]refused[/red]: {error}; nothing was published", highlight=False)
            return 1
        except LogError as error:
            console.print(f"[red]import failed[/red]: {error} (the stream now ends at {await claim_log.head()})", highlight=False)
            console.print(resume_hint("import", path, *([] if window == 256 else ["--window", str(window)])), highlight=False, markup=False, soft_wrap=True)
            return 1
    renumbered = " (renumbered: the file was not a whole log)" if imported.renumbered else ""
    held = f", after the {imported.held} already there" if imported.held else ""
    console.print(f"imported {imported.events} events at sequences {imported.first_seq} to {imported.last_seq}{held}{renumbered}")
    return 0


def resume_hint(command: str, path: Path, *options: str) -> str:
    """How to continue an import or restore that failed half-way: the same command, which resumes where the stream ends."""
    again = shlex.join(["claimlog", command, str(path.resolve()), *options])
    return f"it continues from there, checking what the stream holds first; with the same settings, resume with: {again}"


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(), console=console, transient=False,
    )


def _bar(progress: Progress, name: str, total: int | None):
    """A callback setting the task to a count, every call (the bar ends where the work did); its rate
    is worked out at most every 0.1 s (Rich's speed is not free)."""
    task, last = None, 0.0

    def update(done: int) -> None:
        nonlocal task, last
        if task is None:  # shown from the first update: a step that does not run shows no bar
            task = progress.add_task(name, total=total, rate="")
        progress.update(task, completed=done)
        now = time.monotonic()
        if now - last >= 0.1 or done == total:
            last = now
            speed = next(t for t in progress.tasks if t.id == task).speed
            progress.update(task, rate=f"{speed:,.0f}/s" if speed else "")

    return update
