"""Restoring the log (``claimlog import``, what ``claimlog restore`` runs for the log) into one server and into
a local three-node cluster keeping three copies of the stream: events per second, each into a fresh one.

Target: services/log/restore.py. The log is written as claims take turns, one event each a round, so every
claim has events in every batch of the restore: the shape a clustered stream refused when each batch
expected its claims' last sequences. Both servers sync every acknowledgement to disk. The second figure's
peer is the first (the same export into one server, the same run).

    python bench/restore.py [--events 40000] [--claims 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import record  # noqa: E402
from services.audit.export import export_log, import_file  # noqa: E402
from services.log import ClaimLog, NatsTls, StreamSpec, connect  # noqa: E402
from services.runtime.cluster import LocalCluster  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from tests.builders import attached, drafted  # noqa: E402


async def write_export(url: str, out: Path, *, events: int, claims: int) -> None:
    """A log of ``claims`` claims taking turns, written to one server, exported to ``out``."""
    nc = await connect(url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        ids = [f"CLM-{n:09d}" for n in range(claims)]
        heads: dict[str, tuple[int, str | None]] = dict.fromkeys(ids, (0, None))
        for turn in range(events // claims):
            for start in range(0, claims, 200):  # 200 appends at once: more time out on a busy machine
                some = ids[start : start + 200]
                done = await asyncio.gather(*(
                    claim_log.append(c, [drafted(c) if turn == 0 else attached(c, f"s{turn}")], expected_seq=heads[c][0], prev_hash=heads[c][1])
                    for c in some
                ))
                heads |= {c: (d.last_seq, d.last_hash) for c, d in zip(some, done, strict=True)}
        with out.open("w") as file:
            await export_log(claim_log, file)
    finally:
        await nc.close()


async def restore_rate(url: str, export: Path, *, tls: NatsTls | None, replicas: int) -> float:
    """Events per second of an import of ``export`` into a fresh stream with ``replicas`` copies."""
    nc = await connect(url, tls=tls)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS", replicas=replicas))
        await claim_log.ensure()
        started = time.perf_counter()
        imported = await import_file(claim_log, export)
        return imported.events / (time.perf_counter() - started)
    finally:
        await nc.close()


async def measure(home: Path, *, events: int, claims: int) -> tuple[float, float]:
    export = home / "log.jsonl"
    with EmbeddedNats(home / "source") as source:
        await write_export(source.url_for("admin"), export, events=events, claims=claims)
    with EmbeddedNats(home / "one", sync="always") as one:
        single = await restore_rate(one.url_for("admin"), export, tls=None, replicas=1)
    with LocalCluster(home / "three", size=3, sync="always") as three:
        clustered = await restore_rate(three.url_for("admin"), export, tls=three.tls, replicas=3)
    return single, clustered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--claims", type=int, default=2_000)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as home:
        single, clustered = asyncio.run(measure(Path(home), events=args.events, claims=args.claims))
    print(f"restore into one server           {single:9,.0f} events/s")
    print(f"restore into a three-node cluster {clustered:9,.0f} events/s (three copies)")
    note = f"{args.events} events over {args.claims} claims taking turns, sync always; load average {load:.1f} at the start"
    record("restore of the log into one server", single, unit="events/s", note=note)
    record("restore of the log into a three-node cluster", clustered, unit="events/s", peer=single,
           note=f"{note}; three copies; peer: into one server, same run")


if __name__ == "__main__":
    main()
