"""The projector process: one composition root, running until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal

from projections.registry import build_projections
from services.db import make_engine, require_current
from services.projector.runner import Projector
from services.runtime import open_log
from services.settings import Settings

log = logging.getLogger(__name__)


async def run_projector(settings: Settings, *, stop: asyncio.Event | None = None) -> None:
    """Keep the read models up to date with the log until stopped."""
    stop = stop or _stop_on_signals()
    engine = make_engine(settings.resolved_database_url())
    require_current(engine)
    try:
        async with open_log(settings, client_name=f"claimlog-{settings.projector_name}") as claim_log:
            projector = Projector(
                claim_log, engine, build_projections(), name=settings.projector_name, batch=settings.projector_batch
            )
            log.info("projector %s starting", settings.projector_name)
            await projector.run(stop)
    finally:
        engine.dispose()


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop
