"""The server's cost of reading a partitioned log: one consumer of everything, one consumer with a filter per
partition (``filter_subjects``), or one consumer per partition.

Target: the design of the partitioned workers and the default number of partitions. A worker owning
several partitions can hold one consumer with several filters or one consumer per partition; this
measures what each costs the nats-server process (its CPU time, from /proc, per message delivered)
on the same stream in the same run. The peer of each figure is one consumer with one filter over
the whole log.

    python bench/partitions.py [--events 40000] [--claims 5000] [--partitions 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402
from nats.js.api import AckPolicy, ConsumerConfig  # noqa: E402

from bench.results import record  # noqa: E402
from events.subjects import LogLayout  # noqa: E402
from services.log import StreamSpec  # noqa: E402
from services.runtime.embedded import nats_server_binary  # noqa: E402


def server_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drain(js, names: list[str], stream: str) -> int:
    """Fetch every pending message of the consumers, acking the last of each batch."""
    got = 0

    async def one(name: str) -> None:
        nonlocal got
        sub = await js.pull_subscribe_bind(durable=name, stream=stream)
        while True:
            try:
                messages = await sub.fetch(1000, timeout=1)
            except (nats.errors.TimeoutError, TimeoutError):
                return
            got += len(messages)
            await messages[-1].ack()

    await asyncio.gather(*(one(name) for name in names))
    return got


def designs(layout: LogLayout) -> dict[str, list[ConsumerConfig]]:
    parts = [layout.partition_filter(p) for p in range(layout.partitions)]
    n = layout.partitions

    def config(name: str, filters: list[str]) -> ConsumerConfig:
        return ConsumerConfig(durable_name=name, filter_subjects=filters, ack_policy=AckPolicy.ALL)

    return {
        "one consumer, one filter (the whole log)": [config("all", [layout.all_events])],
        f"one consumer, {n} filter_subjects": [config("multi", parts)],
        f"{n} consumers, one partition each": [config(f"p{p}", [f]) for p, f in enumerate(parts)],
    }


async def run(args: argparse.Namespace) -> None:
    layout = LogLayout("claims", args.partitions)
    store = tempfile.mkdtemp()
    server = subprocess.Popen([str(nats_server_binary()), "-js", "-sd", store, "-p", "-1", "-a", "127.0.0.1", "-ports_file_dir", store],
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            ports = list(Path(store).glob("*.ports"))
            if ports:
                break
            time.sleep(0.05)
        url = json.loads(ports[0].read_text())["nats"][0]
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(StreamSpec("CLAIMS", layout=layout).config())
        pending = [await js.publish_async(layout.publish_subject(f"CLM-{i % args.claims}", f"E{i % 7}"), b"x" * 300, wait_stall=5)
                   for i in range(args.events)]
        await asyncio.gather(*pending)
        figures = {}
        for name, configs in designs(layout).items():
            for config in configs:
                await js.add_consumer("CLAIMS", config)
            before, started = server_cpu_seconds(server.pid), time.perf_counter()
            got = await drain(js, [c.durable_name for c in configs], "CLAIMS")
            wall, cpu = time.perf_counter() - started, server_cpu_seconds(server.pid) - before
            figures[name] = cpu / got * 1e6
            print(f"{name}: {got} messages in {wall:.2f}s, server CPU {cpu:.2f}s, {figures[name]:.1f} us a message")
        whole = figures["one consumer, one filter (the whole log)"]
        for name, value in figures.items():
            record(f"server CPU per message: {name}", value, unit="us", peer=whole,
                   note=f"{args.events} events, {args.claims} claims, {args.partitions} partitions; peer: one consumer of the whole log")
        await nc.close()
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--claims", type=int, default=5_000)
    parser.add_argument("--partitions", type=int, default=16)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
