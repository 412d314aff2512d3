"""``claimlog status``: the NATS nodes holding the log and the token store, and the projector's position and lag."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from services.actors import BUCKET
from services.cli.setup import setup
from services.log.topology import nats_report
from services.runtime.settings import Settings

out = Console()


def register(app: typer.Typer) -> None:
    """Add ``status`` to the claimlog command."""
    app.command()(status)


def status(as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False) -> None:
    """Show the NATS nodes (reachable, which leads the log, copies current or lagging) and the projector's lag."""
    from services.runtime.compose import open_log, run

    settings = setup("WARNING")

    async def gather() -> dict[str, Any]:
        async with open_log(settings, client_name="claimlog-status", role="admin", create=False) as claim_log:
            head = await claim_log.head()
            return {"nats": await nats_report(claim_log.nc, claim_log.stream, f"KV_{BUCKET}"), "head": head}

    report = run(gather())
    report["projections"] = _positions(settings, report["head"])
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        _print(report)
    raise typer.Exit(1 if report["nats"]["problems"] else 0)


def _positions(settings: Settings, head: int) -> dict[str, dict[str, int]]:
    """Each projection's last applied sequence in the active generation, and how far it is behind ``head``."""
    from services.read_api.queries import positions
    from services.rebuild.generations import Generations

    generations = Generations(settings.resolved_database_url())
    try:
        with generations.active()[1].connect() as conn:
            return {name: {"last_seq": seq, "lag_events": max(0, head - seq)} for name, seq in positions(conn).items()}
    finally:
        generations.close()


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
    projections = Table(title=f"projections (log head {report['head']})")
    for column in ("projection", "last_seq", "lag_events"):
        projections.add_column(column)
    for name, position in report["projections"].items():
        projections.add_row(name, str(position["last_seq"]), str(position["lag_events"]))
    out.print(projections)
    for problem in nats["problems"]:
        out.print(f"[red]problem[/red]: {problem}")
