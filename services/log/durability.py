"""Whether an acknowledged event survives a crash: the stream's replicas and the server's disk sync, checked at start.

What a NATS client can see: the stream's replicas and cluster (stream info). Whether the server flushes
to disk before acknowledging (JetStream's ``sync_interval: always``) is not in anything an ordinary
account sees (server INFO, ``$JS.API.INFO``); only the system account (``$SYS.REQ.SERVER.PING.JSZ``)
and the monitoring port (``/jsz``, ``/varz``: ``jetstream.config.sync_always``) show it. So claimlog
knows it for the embedded server, whose configuration it writes, asks the system account for any
other, and says plainly when it cannot tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from nats.aio.client import Client
from nats.js.api import StreamInfo

log = logging.getLogger(__name__)
JSZ_PING = "$SYS.REQ.SERVER.PING.JSZ"
UNSYNCED = "an acknowledged event can be lost if the machine crashes (power loss, kernel panic) before the next flush"


def replication_risk(info: StreamInfo, nc: Client) -> str | None:
    """Why the stream's copies could all be lost with one machine, when it runs on a cluster with one replica."""
    replicas = info.config.num_replicas or 1
    clustered = bool(info.cluster and info.cluster.name) or len(nc.servers) > 1
    if not clustered or replicas > 1:
        return None
    cluster = info.cluster.name if info.cluster and info.cluster.name else "several servers"
    return (
        f"stream {info.config.name} has 1 replica on a cluster ({cluster}): every acknowledged event is on one "
        "server's disk, and lost with it. Set its replicas to 3 (`nats stream edit`, or create it with "
        "CLAIMLOG_NATS_REPLICAS=3)."
    )


def sync_risk(sync: str) -> str | None:
    """Why a server flushing every ``sync`` (not ``always``) can lose acknowledged events."""
    if sync == "always":
        return None
    return f"the nats-server flushes JetStream to disk every {sync}, not before acknowledging: {UNSYNCED}"


async def server_syncs(nc: Client, *, wait: float = 0.5) -> dict[str, bool] | None:
    """Each responding server's name and whether it syncs always, asked of the system account; None if no
    server answers (this user is not in the system account)."""
    answers: dict[str, bool] = {}
    inbox = nc.new_inbox()

    async def collect(msg) -> None:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            body = json.loads(msg.data)
            answers[body["server"]["name"]] = bool(body["data"]["config"].get("sync_always"))

    sub = await nc.subscribe(inbox, cb=collect)
    try:
        await nc.publish(JSZ_PING, b"", reply=inbox)
        await asyncio.sleep(wait)
    finally:
        await sub.unsubscribe()
    return answers or None


def warn_if_not_durable(nc: Client, info: StreamInfo, *, sync: str | None) -> list[str]:
    """Log a WARNING for each way the stream could lose an acknowledged event; returns them.

    ``sync``: the server's sync interval when claimlog configured the server (embedded), else None
    (``warn_if_server_not_synced`` asks the server).
    """
    risks = [risk for risk in (replication_risk(info, nc), sync_risk(sync) if sync else None) if risk]
    for risk in risks:
        log.warning("DURABILITY: %s", risk)
    return risks


async def warn_if_server_not_synced(nc: Client) -> list[str]:
    """Ask the system account whether every server syncs always; log a WARNING if one does not, or if it cannot
    be told (a user outside the system account, the usual case). Returns the warnings."""
    syncs = await server_syncs(nc)
    if syncs is None:
        risks = [
            "cannot tell whether the nats-server flushes to disk before acknowledging: a client sees that only "
            f"through the system account ({JSZ_PING}) or the monitoring port (/jsz: jetstream.config.sync_always). "
            f"Check that its jetstream block says `sync_interval: always` (deploy/nats/*.conf do); otherwise {UNSYNCED}"
        ]
    else:
        lazy = sorted(name for name, always in syncs.items() if not always)
        risks = [f"nats-server(s) {', '.join(lazy)} do not sync always (sync_interval): {UNSYNCED}"] if lazy else []
    for risk in risks:
        log.warning("DURABILITY: %s", risk)
    return risks
