"""``claimlog status``: the NATS nodes holding the log and the token store, the projector's position and lag,
and on a partitioned log each worker with the partitions it holds, their epochs and lag."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from services.cli.setup import setup
from services.identity.keys import signing_report
from services.log.topology import nats_report
from services.registry_buckets import registry_buckets

if TYPE_CHECKING:
    from services.projector.applied import Applied

out = Console()


def register(app: typer.Typer) -> None:
    """Add ``status`` to the claimlog command."""
    app.command()(status)


def status(as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False) -> None:
    """Show the NATS nodes (reachable, which leads the log, copies current or lagging), the projector's lag,
    and each projector worker with the partitions it holds (epoch, position, lag)."""
    from services.projector.applied import applied
    from services.read_api.partitions import partition_section
    from services.runtime.from_settings import open_log, run
    from services.store.generations import Generations

    settings = setup("WARNING")
    generations = Generations(settings.resolved_database_url())

    async def gather() -> dict[str, Any]:
        async with open_log(settings, client_name="claimlog-status", role="admin", create=False) as claim_log:
            found = await applied(claim_log, generations.active()[1])
            report = {"nats": await nats_report(claim_log.nc, claim_log.stream, registry_buckets(claim_log.stream)), "head": found.head}
            report["projections"] = _positions(found)
            report["signing"] = await signing_report(claim_log.nc, stream=claim_log.stream)
            if (partitions := await partition_section(claim_log, generations.active()[1])) is not None:
                report["partitions"] = partitions
            return report

    try:
        report = run(gather())
    finally:
        generations.close()
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print(report)
    raise typer.Exit(1 if report["nats"]["problems"] else 0)


def _positions(found: Applied) -> dict[str, dict[str, Any]]:
    """Each projection's position in the active generation (every event at or below it applied), and how
    far it is behind the head; why either is unknown, when it is."""
    lags = found.lag()
    unknown = {"unknown": found.unknown} if found.unknown else {}
    return {name: {"last_seq": seq, "lag_events": lags[name]} | unknown for name, seq in found.positions.items()}


def _print(report: dict[str, Any]) -> None:
    nats = report["nats"]
    nodes = Table(title=f"NATS nodes (connected to {nats['connected_to']})")
    for column in ("node", "reachable", "leads", "lagging"):
        nodes.add_column(column)
    for name, node in nats["nodes"].items():
        nodes.add_row(name, "yes" if node["reachable"] else "[red]no[/red]", ", ".join(node["leads"]), ", ".join(node["lagging"]))
    out.print(nodes)
    for name, stream in nats["streams"].items():
        out.print(f"{name}: {stream['replicas']} replica(s), leader {stream['leader'] or '[red]none[/red]'}")
    projections = Table(title=f"projections (log head {_shown(report['head'])}; every event at or below last_seq is applied)")
    for column in ("projection", "last_seq", "lag_events"):
        projections.add_column(column)
    for name, position in report["projections"].items():
        projections.add_row(name, _shown(position["last_seq"]), _shown(position["lag_events"]))
    out.print(projections)
    for why in sorted({p["unknown"] for p in report["projections"].values() if "unknown" in p}):
        out.print(f"[yellow]position unknown[/yellow]: {why}")
    if "partitions" in report:
        _print_partitions(report["partitions"])
    _print_signing(report["signing"])
    for problem in nats["problems"]:
        out.print(f"[red]problem[/red]: {problem}")


def _print_signing(signing: dict[str, Any]) -> None:
    if signing["required_after"] is None:
        out.print("[yellow]signing[/yellow]: " + escape(signing["warning"]), highlight=False)
    else:
        out.print(f"signing: required after sequence {signing['required_after']} ({signing['current_keys']} current keys)", highlight=False)


def _shown(value: int | None) -> str:
    return "unknown" if value is None else str(value)


def _print_partitions(report: dict[str, Any]) -> None:
    if "unknown" in report:
        out.print(f"[yellow]partitions[/yellow]: {report['unknown']}")
        return
    workers = Table(title=f"projector workers ({report['partitions']} partitions, checkpoints {report['checkpoints']})")
    for column in ("worker", "live", "partitions", "epoch", "behind", "lag_seconds"):
        workers.add_column(column)
    for name, worker in report["workers"].items():
        workers.add_row(
            name, "yes" if worker["live"] else "[red]no[/red]", _ranges(worker["owns"]), str(worker["epoch"] or "-"),
            _ranges(worker["behind"]) or "-", f"{worker['lag_seconds']:g}",
        )
    if report["unowned"]:
        behind = [p["partition"] for p in report["unowned"] if p["head"] > p["last_seq"]]
        lag = max(p["lag_seconds"] for p in report["unowned"])
        workers.add_row("[red](nobody)[/red]", "-", _ranges([p["partition"] for p in report["unowned"]]), "-", _ranges(behind) or "-", f"{lag:g}")
    out.print(workers)


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5``."""
    spans: list[list[int]] = []
    for number in sorted(numbers):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
