"""Connecting to NATS with settings that survive server restarts."""

from __future__ import annotations

import nats
from nats.aio.client import Client


def server_list(url: str) -> list[str]:
    """The servers of a NATS URL setting: one URL, or several separated by commas (a cluster)."""
    return [server.strip() for server in url.split(",") if server.strip()]


async def connect(url: str, *, name: str = "claimlog", user: str | None = None, password: str | None = None) -> Client:
    """A NATS connection to one server or a cluster, reconnecting for as long as the process lives."""
    return await nats.connect(
        server_list(url),
        name=name,
        user=user,
        password=password,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,
        connect_timeout=5,
        pending_size=64 * 1024 * 1024,
        allow_reconnect=True,
    )
