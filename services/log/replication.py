"""Every stream claimlog keeps on NATS (the log, and the token store's bucket) has the replicas asked of it.

One setting, CLAIMLOG_NATS_REPLICAS, says how many copies: each stream is created with them, and an
existing one with fewer is raised to them by the admin at start-up (JetStream copies it to the new
peers). Servers that cannot hold that many copies (a single server, or a cluster smaller than asked)
stop the start with the reason, rather than leaving one copy where three were asked for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.aio.client import Client
from nats.js.api import StreamInfo
from nats.js.errors import APIError, NotFoundError

from services.log.errors import LogConfigError
from services.log.names import bucket_stream

log = logging.getLogger(__name__)
SETTING = "CLAIMLOG_NATS_REPLICAS"
# A cluster that has just started knows its peers before each has reported in: placing copies on them
# fails with "peer offline" for a moment. Waiting this long for them is part of starting; a cluster too
# small for the copies fails at once ("insufficient resources").
PEERS_JOINING_SECONDS = 15.0
T = TypeVar("T")


def replicas_of(info: StreamInfo) -> int:
    """The copies a stream is configured to keep."""
    return info.config.num_replicas or 1


def cannot_hold(what: str, wanted: int, error: APIError) -> LogConfigError:
    """The error for servers that refuse ``wanted`` copies of ``what``."""
    return LogConfigError(
        f"{what} needs {wanted} replicas ({SETTING}={wanted}) and the NATS servers cannot hold them "
        f"({error.description}): run a JetStream cluster of at least {wanted} servers (`claimlog up --cluster 3` "
        f"on one machine, deploy/compose.yaml across machines), or lower {SETTING}"
    )


async def placed(make: Callable[[], Awaitable[T]], *, what: str, wanted: int, wait: float = PEERS_JOINING_SECONDS) -> T:
    """``make()`` (a stream or bucket created or updated with ``wanted`` copies), tried again while the
    cluster's peers are still joining; a ``LogConfigError`` when the servers cannot hold the copies."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return await make()
        except APIError as error:
            if not _peers_joining(error) or time.monotonic() >= deadline:
                raise cannot_hold(what, wanted, error) from None
            log.info("placing %s copies of %s: %s; trying again", wanted, what, error.description)
            await asyncio.sleep(0.2)


def _peers_joining(error: APIError) -> bool:
    return "peer offline" in (error.description or "")


async def ensure_replicas(nc: Client, info: StreamInfo, wanted: int, *, what: str, change: bool) -> StreamInfo:
    """``info``'s stream with at least ``wanted`` replicas: raised to them when ``change`` (the admin at
    start-up), else a ``LogConfigError`` saying how many it has and who can raise them."""
    has = replicas_of(info)
    if has >= wanted:
        return info
    if not change:
        raise LogConfigError(
            f"{what} has {has} replica(s), fewer than {SETTING}={wanted}: a lost server can take it with it. "
            "`claimlog up` (or the deployment's `stream` job, as admin) raises its replicas"
        )
    log.warning("raising %s from %s to %s replicas (%s)", what, has, wanted, SETTING)
    info.config.num_replicas = wanted
    return await placed(lambda: nc.jetstream().update_stream(info.config), what=what, wanted=wanted)


async def ensure_bucket_replicas(nc: Client, buckets: dict[str, str], wanted: int) -> None:
    """Raise each existing key-value bucket of ``buckets`` (name -> what it holds) to ``wanted`` replicas;
    a bucket not made yet is made with them by the code that first uses it."""
    for bucket, what in buckets.items():
        try:
            info = await nc.jetstream().stream_info(bucket_stream(bucket))
        except NotFoundError:
            continue
        await ensure_replicas(nc, info, wanted, what=f"{what} (bucket {bucket})", change=True)
