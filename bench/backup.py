"""Backing up and restoring the log: ``claimlog export`` then ``import`` (what ``claimlog backup`` uses for the
log), next to the server's own stream snapshot and restore (``$JS.API.STREAM.SNAPSHOT`` / ``RESTORE``,
what it uses for the small key-value buckets).

Target: the choice of mechanism for the log in services/audit/backup.py. The same log of single-event
appends on an embedded server (sync always) is taken both ways and restored into a fresh server both
ways; each figure is events per second, the peer the snapshot's.

    python bench/backup.py [--events 40000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import record  # noqa: E402
from services.audit.export import export_log, import_file  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.snapshot import restore_stream, snapshot_stream  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402
from tests.builders import attached, drafted  # noqa: E402


async def fill(claim_log: ClaimLog, events: int) -> None:
    claims = [f"CLM-{n:09d}" for n in range(events // 2)]
    for start in range(0, len(claims), 200):
        await asyncio.gather(*(
            claim_log.append(c, [drafted(c), attached(c, "s1")], expected_seq=0, prev_hash=None) for c in claims[start:start + 200]
        ))


async def measure(events: int, home: Path) -> dict[str, float]:
    seconds: dict[str, float] = {}
    with EmbeddedNats(home / "source") as source:
        nc = await connect(source.url_for("admin"))
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        await fill(claim_log, events)
        started = time.perf_counter()
        with (home / "log.jsonl").open("w") as out:
            await export_log(claim_log, out)
        seconds["export"] = time.perf_counter() - started
        started = time.perf_counter()
        meta = await snapshot_stream(nc, "CLAIMS", home / "log.snapshot")
        seconds["snapshot"] = time.perf_counter() - started
        await nc.close()
    for way in ("import", "restore"):
        with EmbeddedNats(home / way) as fresh:
            nc = await connect(fresh.url_for("admin"))
            started = time.perf_counter()
            if way == "import":
                claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
                await claim_log.ensure()
                await import_file(claim_log, home / "log.jsonl")
            else:
                await restore_stream(nc, meta, home / "log.snapshot")
            seconds[way] = time.perf_counter() - started
            await nc.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        seconds = asyncio.run(measure(args.events, Path(home)))
    rate = {name: args.events / value for name, value in seconds.items()}
    for name, value in seconds.items():
        print(f"{name:9} {value:7.2f} s  {rate[name]:9,.0f} events/s")
    note = f"{args.events} events, sync always; peer: the server's stream snapshot / restore"
    record("backup of the log: export", rate["export"], unit="events/s", peer=rate["snapshot"], note=note)
    record("restore of the log: import", rate["import"], unit="events/s", peer=rate["restore"], note=note)


if __name__ == "__main__":
    main()
