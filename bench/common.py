"""Shared pieces of the benchmarks: percentiles, peak memory, publishing a backlog with progress, the backlog's peer store."""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sqlite3
import statistics
from collections.abc import Iterable
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from services.log import ClaimLog
from tests.builders.workload import claim_events


def percentile(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(p * 10) - 1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
    )


async def publish_backlog(claim_log: ClaimLog, *, claims: int, per_claim: int, seed: int = 1) -> int:
    """Publish ``claims`` x ``per_claim`` events, pipelined, with a progress bar; returns the log head."""
    rng = random.Random(seed)
    with progress() as bar:
        task = bar.add_task("publish", total=claims * per_claim, rate="")
        async with claim_log.pipeline(window=256) as pipeline:
            for number in range(claims):
                events = claim_events(number, per_claim, rng)
                await pipeline.submit(events[0].claim_id, events, expected_seq=0, prev_hash=None)
                if number % 100 == 0:
                    speed = bar.tasks[0].speed
                    bar.update(task, completed=number * per_claim, rate=f"{speed:,.0f} events/s" if speed else "")
        bar.update(task, completed=claims * per_claim)
    return await claim_log.head()


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line, with the options every benchmark shares."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sync", default="always", help="embedded nats-server sync_interval (always, or e.g. 2m)")
    return parser


class KeepAlive:
    """Keep-alive HTTP/1.1 requests on a few raw connections: the load generator must cost far less
    than the server it measures, and httpx costs about a millisecond of CPU per request here."""

    def __init__(self, port: int, *, connections: int = 16, headers: dict[str, str] | None = None) -> None:
        self._port, self._connections = port, connections
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._idle: asyncio.Queue = asyncio.Queue()

    async def open(self) -> None:
        for _ in range(self._connections):
            self._idle.put_nowait(await asyncio.open_connection("127.0.0.1", self._port))

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """The status and body of one request (a JSON body when given)."""
        data = b"" if body is None else json.dumps(body).encode()
        extra = f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n" if body is not None else ""
        reader, writer = await self._idle.get()
        try:
            writer.write(f"{method} {path} HTTP/1.1\r\nHost: bench\r\n{self._headers}{extra}\r\n".encode() + data)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
            return int(head.split(b" ", 2)[1]), await reader.readexactly(length)
        finally:
            self._idle.put_nowait((reader, writer))


class PeerCounts:
    """The backlog benchmarks' peer store: events and sources counted per claim with stdlib sqlite3, a
    batch and its checkpoint in one transaction (the simplest honest projection)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE counts (claim_id TEXT PRIMARY KEY, events INTEGER, sources INTEGER)")
        self.db.execute("CREATE TABLE checkpoint (seq INTEGER)")
        self.db.execute("INSERT INTO checkpoint VALUES (0)")

    def apply(self, events: Iterable[bytes], last_seq: int) -> None:
        """Count a batch of stored events (JSON) and write the counts and the checkpoint in one transaction."""
        rows: dict[str, tuple[int, int]] = {}
        for data in events:
            event = json.loads(data)
            counted, sources = rows.get(event["claim_id"], (0, 0))
            rows[event["claim_id"]] = (counted + 1, sources + (event["type"] == "SourceAttached"))
        with self.db:
            self.db.executemany(
                "INSERT INTO counts VALUES (?, ?, ?) ON CONFLICT(claim_id) DO UPDATE SET "
                "events = events + excluded.events, sources = sources + excluded.sources",
                [(claim, e, s) for claim, (e, s) in rows.items()],
            )
            self.db.execute("UPDATE checkpoint SET seq = ?", (last_seq,))

    def close(self) -> None:
        self.db.close()
