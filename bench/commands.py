"""The command API's latency under a steady load from a separate process.

    python bench/commands.py [--rate 200] [--seconds 20] [--sync always|2m] [--signed]

Runs the real services as separate processes (`claimlog projector`, `claimlog api`) on an embedded
nats-server and SQLite; this process is the load: it sends `attach_source` commands at a fixed rate
(open loop) over keep-alive HTTP connections, each authenticated, decided against the claim's state
read from the log, appended with its expected sequence, and answered with its sequence. The peer in
the same run: the same number of events published straight to JetStream by nats-py with the same two
headers (the floor under any command API). Target: p99 under 25 ms at 200 commands/s, so that a person
or a pipeline writing through the API waits no longer than a page load for its acknowledgement.

With ``--signed`` the registry is the one ``claimlog up`` makes: the API signs every event with the
registry's delegate key, registered and required from sequence 0, so the write side and the projector
check a signature on every event they read (the figures are recorded with ", signed").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import KeepAlive, arguments, percentile  # noqa: E402
from bench.latency import paced, start, wait_healthy  # noqa: E402
from bench.results import record  # noqa: E402
from events import Actor  # noqa: E402
from services.identity.actors import ActorStore  # noqa: E402
from services.log import connect  # noqa: E402
from services.runtime.db import make_engine, upgrade  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402

console = Console()
CLAIMS = 1000  # a few commands per claim over a run, as on the registry (claims hold tens of sources, not thousands)
ACTOR = Actor(id="source-bot", kind="service")


def draft(n: int) -> dict:
    return {
        "claim_id": f"CLM-{n:04d}", "slug": f"claim-{n}", "statement": f"Statement {n}.",
        "capability": "Latency", "observed_on": "A benchmark.",
    }


async def post(client: KeepAlive, path: str, body: dict) -> tuple[int, dict]:
    status, data = await client.request("POST", path, body)
    return status, json.loads(data)


async def command_latency(poster: KeepAlive, rate: float, seconds: float) -> tuple[list[float], int]:
    for status, body in await asyncio.gather(*(post(poster, "/commands/draft_claim", draft(n)) for n in range(CLAIMS))):
        assert status in (200, 201), body
    await asyncio.sleep(2)  # let the projector catch up with the drafts
    failures = 0

    async def measure(i: int) -> float:
        nonlocal failures
        started = time.perf_counter()
        status, body = await post(
            poster,
            "/commands/attach_source",
            {"claim_id": f"CLM-{i % CLAIMS:04d}", "source_id": f"s{i}", "relation": "supports", "measured": f"Measurement {i}."},
        )
        if status != 201:
            failures += 1
        return (time.perf_counter() - started) * 1000

    return await paced(rate, seconds, measure), failures


async def peer_latency(url: str, rate: float, seconds: float) -> list[float]:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="PEER", subjects=["peer.>"])
    heads: dict[str, int] = {}
    locks = {f"c{n}": asyncio.Lock() for n in range(CLAIMS)}

    async def measure(i: int) -> float:
        claim = f"c{i % CLAIMS}"
        async with locks[claim]:
            started = time.perf_counter()
            headers = {
                "Nats-Msg-Id": f"peer-{i}",
                "Nats-Expected-Last-Subject-Sequence": str(heads.get(claim, 0)),
                "Nats-Expected-Last-Subject-Sequence-Subject": f"peer.{claim}.*",
            }
            ack = await js.publish(f"peer.{claim}.SourceAttached", json.dumps({"i": i}).encode() * 10, headers=headers)
            heads[claim] = ack.seq
            return (time.perf_counter() - started) * 1000

    latencies = await paced(rate, seconds, measure)
    await nc.close()
    return latencies


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="claimlog-commands-"))
    server = EmbeddedNats(workdir / "nats", sync=args.sync)
    server.start()
    url = server.url_for("admin")
    database = f"sqlite:///{workdir / 'claimlog.sqlite3'}"
    upgrade(make_engine(database))
    env = {**os.environ, "CLAIMLOG_NATS_URL": url, "CLAIMLOG_DATABASE_URL": database, "CLAIMLOG_API_PORT": str(args.port)}
    env["CLAIMLOG_RATE_LIMIT_PER_MINUTE"] = "0"  # one actor at the bench's rate: measure the path, not the limit
    if args.signed:  # as `claimlog up` makes a registry: its delegate key registered, signatures required from sequence 0
        from services.orchestration.trust import ensure_trust
        from services.runtime.settings import Settings

        env["CLAIMLOG_DATA_DIR"] = str(workdir / "data")
        trust = await ensure_trust(Settings(nats_url=url, database_url=database, data_dir=workdir / "data"))
        assert trust.key_file is not None and trust.required_after == 0, trust
        env["CLAIMLOG_SIGNING_KEY"] = str(trust.key_file)
    services = [start(["projector"], env), start(["api"], env)]
    try:
        nc = await connect(url)
        token, _ = await (await ActorStore.open(nc, create=True)).issue(ACTOR)
        await nc.close()
        await wait_healthy(f"http://127.0.0.1:{args.port}")
        poster = KeepAlive(args.port, headers={"Authorization": f"Bearer {token}"})
        await poster.open()
        ours, failures = await command_latency(poster, args.rate, args.seconds)
        peer = await peer_latency(url, args.rate, args.seconds)
    finally:
        for service in services:
            service.terminate()
            service.wait()
        server.stop()
    table = Table(title=f"command latency, {args.rate:.0f} commands/s for {args.seconds:.0f} s, nats sync_interval={args.sync}")
    for column in ("path", "requests", "p50 ms", "p90 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right" if column != "path" else "left")
    for name, values in (
        ("claimlog: POST /commands/attach_source (auth, read, decide, append)", ours),
        ("peer: js.publish with the same two headers", peer),
    ):
        table.add_row(name, str(len(values)), *(f"{percentile(values, p):.1f}" for p in (50, 90, 99)), f"{max(values):.1f}")
    console.print(table)
    console.print(f"failed commands: {failures}; target: p99 < 25 ms -> {'met' if percentile(ours, 99) < 25 else 'NOT met'}")
    for p in (50, 99):
        record(f"command p{p}{', signed' if args.signed else ''}", percentile(ours, p), unit="ms", peer=percentile(peer, p))


if __name__ == "__main__":
    parser = arguments(__doc__)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--port", type=int, default=18766)
    parser.add_argument("--signed", action="store_true", help="a registry that signs every event and requires it")
    asyncio.run(main(parser.parse_args()))
