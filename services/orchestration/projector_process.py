"""The projector process: the projector on one NATS connection, until SIGINT or SIGTERM.

On a partitioned log (CLAIMLOG_PARTITIONS > 0) the process is one projector worker
(``services/projector/worker.py``): alone it folds every partition, beside others it folds the partitions it holds.
On an unpartitioned log it is the one projector, folding the whole log.

The process holds one connection, claimlog's own (``services/log/servers.py``): it reads the stream's info,
the events (handed straight to the consumer without parsing their stored headers, ``subscribe_plain``:
more events per second on a backlog than on FastStream's connection, bench/backlog.py), the leases and
the notices. Its lifecycle is plain asyncio (docs/decisions/0008-faststream-where-it-serves.md)."""

from __future__ import annotations

import asyncio
import logging
import signal

from nats.aio.client import Client

from projections.registry import build_projections
from services.log import ClaimLog
from services.log.names import leases_bucket
from services.log.servers import connect
from services.projector.connections import session_name
from services.projector.leases import Leases
from services.projector.projector import LiveProjector
from services.projector.worker import Worker
from services.rebuild.replay import rebuild_if_stale
from services.runtime.db import make_engine, require_current, session_bound
from services.runtime.from_settings import nats_server, nats_tls, ready, stream_spec
from services.runtime.settings import Settings
from services.store.generations import Generations

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ProjectorService:
    """The projector's lifecycle: connect (waiting for NATS as long as it takes), fold until stopped, and on
    a stop let the batch in flight commit (and a worker give its leases back) before the connection closes."""

    def __init__(self, settings: Settings, nats_url: str) -> None:
        self.settings, self._nats_url = settings, nats_url
        self._stop_event = asyncio.Event()

    def stop(self) -> None:
        """Ask the projector to stop after the batch in flight (what SIGINT and SIGTERM do)."""
        self._stop_event.set()

    async def run(self) -> None:
        """Until ``stop``; a failure of the projector is logged and raised."""
        nc = await self._connect()
        if nc is None:
            return  # stopped before NATS answered
        try:
            claim_log = ClaimLog(nc, stream_spec(self.settings))
            # As the projector role this only reads the stream's info: `claimlog up` (as admin) creates it.
            await ready(claim_log)
            log.info("projector %s started", self.settings.projector_name)
            try:
                await self._run(claim_log)
            except Exception as failure:
                log.critical("projector stopped: %s", failure)
                raise
            log.info("projector %s stopped", self.settings.projector_name)
        finally:
            await nc.close()

    async def _connect(self) -> Client | None:
        """The process's one connection, or None if stopped first; while the server is down or refuses,
        the reason is logged once in a while (``ErrorLog``) and the connection tried four times a second."""
        connecting = asyncio.ensure_future(
            connect(self._nats_url, name=f"claimlog-{self.settings.projector_name}", first_connect_seconds=None, tls=nats_tls(self.settings))
        )
        stopping = asyncio.ensure_future(self._stop_event.wait())
        try:
            await asyncio.wait((connecting, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if connecting.done():
            return connecting.result()
        while not connecting.done():  # a cancel nats-py's connect loop swallows (closing a failed try) is sent again
            connecting.cancel()
            await asyncio.wait((connecting,), timeout=0.5)
        if not connecting.cancelled() and connecting.exception() is None:
            await connecting.result().close()  # it connected as it was stopped
        return None

    async def _run(self, claim_log: ClaimLog) -> None:
        generations = Generations(self.settings.resolved_database_url())
        try:
            await rebuild_if_stale(self.settings, generations)
            if claim_log.layout.partitioned:
                await self._work(claim_log)
                return
            projector = LiveProjector(
                claim_log, generations, build_projections(), name=self.settings.projector_name, batch=self.settings.projector_batch
            )
            projector.announce = True  # the live pages' streams (services/read_api/live_streams.py) hear its commits
            await projector.run(self._stop_event)
        finally:
            generations.close()

    async def _work(self, claim_log: ClaimLog) -> None:
        """Run as one of the workers dividing the partitions (alone, it folds every one), every wait
        of its database connections bounded below its lease (a rebuild at start is not)."""
        name = self.settings.resolved_worker_name()
        leases = await Leases.open(
            claim_log.nc.jetstream(), name, ttl=self.settings.lease_seconds, replicas=self.settings.nats_replicas,
            bucket=leases_bucket(claim_log.stream),
        )
        generations = Generations(
            self.settings.resolved_database_url(), wait_bound=session_bound(self.settings.lease_seconds), session_name=session_name(name, claim_log.stream)
        )
        try:
            worker = Worker(
                claim_log, leases, generations.home, build_projections,
                consumer_prefix=self.settings.projector_name, batch=self.settings.projector_batch,
                lease_seconds=self.settings.lease_seconds, generations=generations,
            )
            await worker.run(self._stop_event)
        finally:
            generations.close()


async def run_projector(settings: Settings) -> None:
    """Keep the read models up to date with the log until SIGINT or SIGTERM."""
    engine = make_engine(settings.resolved_database_url(), create=False)
    require_current(engine)
    try:
        async with nats_server(settings, role="projector") as url:
            service = ProjectorService(settings, url)
            loop = asyncio.get_running_loop()
            for signum in SIGNALS:
                loop.add_signal_handler(signum, service.stop)
            try:
                await service.run()
            finally:
                for signum in SIGNALS:
                    loop.remove_signal_handler(signum)
    finally:
        engine.dispose()
