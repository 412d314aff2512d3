"""What claimlog's two overrides of nats-py's private hooks are worth, each against nats-py's own path in the same run.

    python bench/internals.py [--events 20000] [--claims 2000] [--rounds 3] [--sync always|2m]

``services/log/connection.py`` overrides ``Client._send_publish`` (a header block encoded once goes out as
it is) and ``Client._process_msg`` (a plain subscription's messages go from the parser straight to a
function). Each is measured by switching it off alone, on the same embedded nats-server, the variants
taking turns for ``--rounds`` rounds (medians):

- appends, header block: the backlog's pipelined appends on claimlog's client, CPU of this process per
  event, against the same client handing nats-py a header dictionary to encode;
- appends, acks from the parser: that client (dictionaries, acks from the parser) against nats-py's own
  client (dictionaries, acks through a subscription callback);
- projector: the projector's rate on a backlog with claimlog's client, against nats-py's own client.

Target for keeping an override: a gain clearly above the rounds' spread (a few per cent). A private hook
ties claimlog to one nats-py minor release (pyproject.toml), a price worth paying only for a real gain.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nats.aio.client import Client  # noqa: E402
from nats.js.errors import NotFoundError  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, publish_backlog  # noqa: E402
from bench.results import record  # noqa: E402
from projections.registry import build_projections  # noqa: E402
from services.log import ClaimLog, StreamSpec  # noqa: E402
from services.log.connection import FastHeadersClient  # noqa: E402
from services.projector import Projector  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from services.runtime.from_settings import run  # noqa: E402

console = Console()
STREAM = "CLAIMS"


class DictionaryHeadersClient(FastHeadersClient):
    """claimlog's client without its publish override: nats-py encodes each header dictionary."""

    publishes_header_blocks = False


CLIENTS = {"claimlog": FastHeadersClient, "dictionary headers": DictionaryHeadersClient, "nats-py": Client}


async def connected(url: str, client_class: type[Client]) -> ClaimLog:
    nc = client_class()
    await nc.connect(url, pending_size=64 * 1024 * 1024)
    return ClaimLog(nc, StreamSpec(STREAM))


async def append_cpu_per_event(url: str, client_class: type[Client], args) -> float:
    """CPU µs of this process per event appended, into a fresh stream."""
    claim_log = await connected(url, client_class)
    with contextlib.suppress(NotFoundError):  # the first round has no stream yet
        await claim_log.nc.jetstream().delete_stream(STREAM)
    await claim_log.ensure()
    started = time.process_time()
    head = await publish_backlog(claim_log, claims=args.claims, per_claim=args.events // args.claims)
    cpu = time.process_time() - started
    await claim_log.nc.close()
    return cpu / head * 1e6


async def projector_rate(url: str, client_class: type[Client], workdir: Path, round_: int) -> float:
    """Events/s of the projector over the whole stream, into a fresh SQLite file."""
    claim_log = await connected(url, client_class)
    head = await claim_log.head()
    name = f"{client_class.__name__.lower()}-{round_}"
    engine = make_engine(f"sqlite:///{workdir / name}.sqlite3")
    upgrade(engine)
    projector = Projector(claim_log, engine, build_projections(), name=name, batch=1000)
    started = time.perf_counter()
    await projector.run_until(head, timeout=3600)
    elapsed = time.perf_counter() - started
    engine.dispose()
    await claim_log.nc.close()
    return head / elapsed


async def main(args) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-bench-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    url = server.start()
    appends: dict[str, list[float]] = {name: [] for name in CLIENTS}
    projector: dict[str, list[float]] = {"claimlog": [], "nats-py": []}
    try:
        for round_ in range(args.rounds):
            for name, client_class in CLIENTS.items():
                appends[name].append(await append_cpu_per_event(url, client_class, args))
            for name in projector:
                projector[name].append(await projector_rate(url, CLIENTS[name], workdir, round_))
    finally:
        server.stop()
    report({name: statistics.median(v) for name, v in appends.items()}, {name: statistics.median(v) for name, v in projector.items()}, appends, projector)


def report(append: dict[str, float], project: dict[str, float], appends: dict, projector: dict) -> None:
    table = Table(title="nats-py's private hooks, overridden and not (medians of the rounds)")
    for column in ("what", "override", "nats-py's own", "gain", "rounds (override / own)"):
        table.add_column(column)
    rows = [
        ("append CPU µs/event: header block (_send_publish)", "claimlog", "dictionary headers", append, appends, False),
        ("append CPU µs/event: acks from the parser (_process_msg)", "dictionary headers", "nats-py", append, appends, False),
        ("projector events/s: from the parser (_process_msg)", "claimlog", "nats-py", project, projector, True),
    ]
    for what, ours, theirs, medians, rounds, higher_is_better in rows:
        gain = medians[ours] / medians[theirs] if higher_is_better else medians[theirs] / medians[ours]
        spread = f"{', '.join(f'{v:,.1f}' for v in rounds[ours])} / {', '.join(f'{v:,.1f}' for v in rounds[theirs])}"
        table.add_row(what, f"{medians[ours]:,.1f}", f"{medians[theirs]:,.1f}", f"{gain:.2f}x", spread)
        unit = "events/s" if higher_is_better else "µs"
        record(what, medians[ours], unit=unit, peer=medians[theirs], note="peer: the same run with nats-py's own hook")
    console.print(table)


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--claims", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    run(main(parser.parse_args()))
