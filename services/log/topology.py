"""Which NATS nodes hold claimlog's streams (the log and its buckets), which leads each, and whether each
copy is current: what ``GET /health`` and ``claimlog status`` show, read from stream info's cluster section.

A node is reachable when it answers the report itself (the one connected to), leads a stream, or holds a
current copy the leader has heard from lately; a copy that is silent or behind, or a stream with fewer
peers than replicas, is a problem to name. A stream without a leader (an election, or a cluster that
lost its majority) is named as such: its copies are then behind nobody, and say nothing of their nodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from nats.aio.client import Client
from nats.js.api import StreamInfo
from nats.js.errors import ServiceUnavailableError

ASK_TIMEOUT = 2.0  # seconds a report waits for each stream's info
# A copy whose node the leader has not heard from for this long is counted down: the leader hears from
# each peer every second, and marks it not current only several seconds later.
SILENT_SECONDS = 3.0


def stream_report(info: StreamInfo) -> dict[str, Any]:
    """One stream's replicas, its leader, and each other copy's state."""
    cluster = info.cluster
    peers = {
        peer.name: {
            "current": bool(peer.current), "offline": bool(peer.offline), "lag": peer.lag or 0,
            "seen_seconds_ago": round((peer.active or 0) / 1e9, 1),
        }
        for peer in (cluster.replicas if cluster else None) or []
    }
    return {"replicas": info.config.num_replicas or 1, "leader": cluster.leader if cluster else None, "peers": peers}


def problems_of(name: str, what: str, report: dict[str, Any]) -> list[str]:
    """What is wrong with one stream's copies, in words."""
    problems = []
    if report["leader"] is None and report["replicas"] > 1:
        problems.append(
            f"{what} ({name}) has no leader: it takes no writes until one is elected, which needs a majority of "
            f"its {report['replicas']} replicas up"
        )
        return problems  # its copies wait for the election: none is behind a leader, and who answers is unknown
    held = (1 if report["leader"] else 0) + len(report["peers"])
    if report["replicas"] > 1 and held < report["replicas"]:
        problems.append(f"{what} ({name}) is held by {held} of its {report['replicas']} replicas")
    for peer, state in sorted(report["peers"].items()):
        if state["offline"] or state["seen_seconds_ago"] > SILENT_SECONDS:
            problems.append(f"{what} ({name}): the leader has not heard from {peer} for {state['seen_seconds_ago']}s")
        elif not state["current"]:
            behind = f"is behind by {state['lag']} operations" if state["lag"] else "is catching up (not yet current)"
            problems.append(f"{what} ({name}): the copy on {peer} {behind}")
    return problems


async def nats_report(nc: Client, stream: str, buckets: Mapping[str, str]) -> dict[str, Any]:
    """The NATS nodes holding the log and the registry's buckets (``buckets``: each bucket's stream, with
    what it holds; one not made yet is left out): per stream, per node, and the problems."""
    js = nc.jetstream(timeout=ASK_TIMEOUT)
    streams: dict[str, Any] = {}
    problems: list[str] = []
    asked = [(stream, "the log"), *buckets.items()]
    # Asked all at once: a stream the connection may not read (a reader's, the token store) costs one wait, not one each.
    answers = await asyncio.gather(*(asyncio.wait_for(js.stream_info(name), ASK_TIMEOUT) for name, _ in asked), return_exceptions=True)
    for (name, what), answer in zip(asked, answers, strict=True):
        if isinstance(answer, Exception):  # a stream that cannot be read is reported, not raised
            if name != stream and "not found" in str(answer).lower():
                continue  # a bucket made on first use (no actor added yet, no worker started)
            problems.append(f"{what} ({name}) could not be read ({_unread(answer)})")
            continue
        report = stream_report(answer)
        streams[name] = report
        problems += problems_of(name, what, report)
    return {
        "connected_to": nc.connected_url.netloc.rpartition("@")[2] if nc.connected_url else None,
        "streams": streams,
        "nodes": nodes_of(streams, connected=_server_name(nc)),
        "problems": problems,
    }


def _unread(error: Exception) -> str:
    if isinstance(error, ServiceUnavailableError):  # 10008: no JetStream leader to answer
        return "JetStream is unavailable: the cluster is electing a leader, or fewer than a majority of its nodes are up"
    return type(error).__name__


def _server_name(nc: Client) -> str | None:
    """The name of the node the connection is on (from its INFO greeting; nats-py keeps it unexposed)."""
    return getattr(nc, "_server_info", {}).get("server_name")


def nodes_of(streams: dict[str, Any], *, connected: str | None = None) -> dict[str, Any]:
    """Each node: whether it is reachable, the streams it leads, and those whose copy on it lags.
    ``connected``: the node that answered the report, reachable whatever its copies' states."""
    nodes: dict[str, Any] = {}

    def node(name: str) -> dict[str, Any]:
        return nodes.setdefault(name, {"reachable": False, "leads": [], "lagging": []})

    silent_somewhere: set[str] = set()
    for stream, report in streams.items():
        if report["leader"]:
            leader = node(report["leader"])
            leader["reachable"] = True
            leader["leads"].append(stream)
        elif report["replicas"] > 1:
            for peer in report["peers"]:
                node(peer)  # listed; a copy waiting for an election says nothing of its node
            continue
        for peer, state in report["peers"].items():
            silent = state["offline"] or state["seen_seconds_ago"] > SILENT_SECONDS
            if silent or not state["current"]:
                node(peer)["lagging"].append(stream)
            else:
                node(peer)["reachable"] = True
            if silent:
                silent_somewhere.add(peer)
    for name in silent_somewhere:  # a leader elected since may not have missed it yet
        nodes[name]["reachable"] = bool(nodes[name]["leads"])
    if connected is not None:
        node(connected)["reachable"] = True  # it answered this very report
    return dict(sorted(nodes.items()))
