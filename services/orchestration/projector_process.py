"""The projector process: a FastStream application hosting the projector on its broker's connection.

On a partitioned log (CLAIMLOG_PARTITIONS > 0) the process is one projector worker
(``services/projector/worker.py``): alone it folds every partition, beside others it folds its share.
On an unpartitioned log it is the one projector, folding the whole log."""

from __future__ import annotations

import asyncio
import logging

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.nats.security import NatsSecurity, NatsUserPassword
from nats.aio.client import Client
from sqlalchemy import Engine

from projections.registry import build_projections
from services.log import ClaimLog, LogError
from services.log.names import leases_bucket
from services.log.servers import ErrorLog, connect, inbox_prefix, split_credentials
from services.projector.connections import session_name
from services.projector.leases import Leases
from services.projector.live import Projector
from services.projector.shares import level
from services.projector.worker import Worker
from services.rebuild.replay import rebuild_if_stale
from services.runtime.compose import nats_server, nats_tls, ready, stream_spec
from services.runtime.db import make_engine, require_current, session_bound
from services.runtime.settings import Settings
from services.store.generations import Generations

log = logging.getLogger(__name__)
# FastStream's own loggers write to the streams they find, in colour whether or not those are terminals;
# through this one its lines go where the process's other lines go, formatted as they are.
faststream_log = logging.getLogger("claimlog.faststream")


class ProjectorService:
    """The projector's lifecycle inside a FastStream app: start after the broker connects, stop on shutdown."""

    def __init__(self, settings: Settings, engine: Engine, nats_url: str) -> None:
        self.settings, self.engine, self._nats_url = settings, engine, nats_url
        servers, user, password = split_credentials(nats_url)
        self._tls = nats_tls(settings)
        context = self._tls.context() if self._tls is not None else None
        if user is not None:
            security = NatsUserPassword(user, password, ssl_context=context)
        else:
            security = NatsSecurity(ssl_context=context) if context is not None else None
        self.broker = NatsBroker(
            servers,
            name=f"claimlog-{settings.projector_name}",
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.25,
            error_cb=ErrorLog(nats_url).report,  # FastStream says nothing while it cannot connect
            security=security,
            inbox_prefix=inbox_prefix(user),
            logger=faststream_log,
        )
        self.app = FastStream(self.broker, logger=faststream_log)
        self.app.after_startup(self._start)
        self.app.on_shutdown(self._stop)
        self._stop_event = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._events: Client | None = None
        self.failure: BaseException | None = None

    async def _start(self) -> None:
        # As the projector role this only reads the stream's info: `claimlog up` (as admin) creates it.
        await ready(ClaimLog(self.broker.connection, stream_spec(self.settings)))
        # The events arrive on a claimlog connection of their own, which hands them straight to the
        # consumer without parsing their stored headers (``subscribe_plain``): more events per second
        # on a backlog than on the broker's connection (bench/backlog.py).
        self._events = await self._connect_events()
        claim_log = ClaimLog(self._events, stream_spec(self.settings))
        self._task = asyncio.create_task(self._run(claim_log))
        self._task.add_done_callback(self._on_done)
        log.info("projector %s started", self.settings.projector_name)

    async def _connect_events(self) -> Client:
        """The events' connection; the server may be restarting (the broker's connection is up, or was)."""
        delay = 0.1
        while True:
            try:
                return await connect(
                    self._nats_url, name=f"claimlog-{self.settings.projector_name}-events",
                    first_connect_seconds=self.settings.nats_connect_seconds, tls=self._tls,
                )
            except LogError as error:  # the server is down or restarting: connect waited for it, and says why
                log.warning("connecting to NATS for the events: %s; retrying in %.1fs", error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _run(self, claim_log: ClaimLog) -> None:
        generations = Generations(self.settings.resolved_database_url())
        try:
            await rebuild_if_stale(self.settings, generations)
            if claim_log.layout.partitioned:
                await self._work(claim_log)
                return
            active = generations.engine(generations.active_number())
            # Checkpoints the projector's former share processes left apart are brought to one position first.
            await level(claim_log, active, shares=1, name=self.settings.projector_name, batch=self.settings.projector_batch)
            projector = Projector(
                claim_log,
                self.engine,
                build_projections(),
                name=self.settings.projector_name,
                batch=self.settings.projector_batch,
                generations=generations,
            )
            projector.announce = True  # the live pages' streams (services/read_api/live.py) hear its commits
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

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.failure = task.exception()
            log.critical("projector stopped: %s", self.failure)
        self.app.exit()

    async def _stop(self) -> None:
        self._stop_event.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self._events is not None:
            await self._events.close()


async def run_projector(settings: Settings) -> None:
    """Keep the read models up to date with the log until SIGINT or SIGTERM."""
    engine = make_engine(settings.resolved_database_url(), create=False)
    require_current(engine)
    try:
        async with nats_server(settings, role="projector") as url:
            service = ProjectorService(settings, engine, url)
            await service.app.run()
        if service.failure is not None:
            raise service.failure
    finally:
        engine.dispose()
