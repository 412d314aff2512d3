"""Composition helpers: open the log (embedded or remote) and the database from one Settings object."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from services.embedded import EmbeddedNats, running_url
from services.log import ClaimLog, StreamSpec, connect
from services.settings import Settings

log = logging.getLogger(__name__)


def stream_spec(settings: Settings) -> StreamSpec:
    """The stream claimlog runs on, from settings."""
    return StreamSpec(settings.stream, settings.stream_replicas, settings.duplicate_window_seconds)


@asynccontextmanager
async def nats_server(settings: Settings) -> AsyncIterator[str]:
    """The NATS URL to use: CLAIMLOG_NATS_URL, else the data directory's embedded server (started if needed)."""
    url = settings.nats_url or running_url(settings.data_dir)
    if url is not None:
        yield url
        return
    embedded = EmbeddedNats(settings.data_dir, sync=settings.nats_sync)
    url = await asyncio.to_thread(embedded.start)
    try:
        yield url
    finally:
        await asyncio.to_thread(embedded.stop)


@asynccontextmanager
async def open_log(settings: Settings, *, client_name: str = "claimlog") -> AsyncIterator[ClaimLog]:
    """The claim log, its stream created or verified, on the NATS server ``nats_server`` picks."""
    async with nats_server(settings) as url:
        nc = await connect(url, name=client_name)
        try:
            claim_log = ClaimLog(nc, stream_spec(settings))
            await claim_log.ensure()
            yield claim_log
        finally:
            await nc.drain()
