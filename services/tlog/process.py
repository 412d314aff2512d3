"""The integrator's process (``claimlog tlog integrate``, which ``claimlog up`` runs): until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket

from services.log.tlog_store import TlogStore
from services.runtime.from_settings import open_log
from services.runtime.settings import Settings
from services.tlog.integrator import Integrator
from services.tlog.keys import ensure_signer, key_path
from services.tlog.witnesses import Witnesses, parse_witnesses

log = logging.getLogger(__name__)


async def run_integrator(settings: Settings, *, role: str = "projector", origin: str | None = None) -> None:
    """Integrate the stream of ``settings`` into its transparency log, signing with the data directory's log key."""
    signer = ensure_signer(key_path(settings.data_dir, settings.stream), settings.stream, origin)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with open_log(settings, client_name="claimlog-tlog", role=role) as claim_log:
        store = await TlogStore.open(claim_log.nc, claim_log.stream, replicas=claim_log.spec.replicas)
        witnesses = Witnesses(parse_witnesses(settings.tlog_witnesses), store) if settings.tlog_witnesses else None
        integrator = Integrator(
            claim_log.nc, store, signer, holder=f"{socket.gethostname()}-{os.getpid()}", layout=claim_log.layout,
            witnesses=witnesses,
        )
        log.info("transparency log of %s: integrating as %s", claim_log.stream, signer.vkey())
        try:
            await integrator.run(stop)
        finally:
            if witnesses is not None:
                await witnesses.close()
