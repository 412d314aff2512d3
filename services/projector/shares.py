"""The projector as several processes, each folding one share of the claims.

A claim's rows depend on that claim's events alone (a rebuild's workers rely on the same), so with
``CLAIMLOG_PROJECTOR_SHARES=n`` the projector runs n processes, each reading the whole log and applying
the events of the claims in its share (``claim_partition``), with a durable consumer and checkpoint
rows of its own. One process keeps one core busy at most; shares put more cores to work
(``bench/backlog.py`` measures one process against them). Every share still receives every event, so
in all they spend more CPU than one process: more shares than cores only adds work.

The read API's consistency and lag take the lowest checkpoint of a projection's shares, so a read that
waits for a sequence waits for every share. A rebuild writes its generation's checkpoints for one
process; each share divides them anew when it follows the switch (``Projector.load_checkpoint``).
Checkpoints can be divided only while they stand at one position (an event folded twice would count
twice): before starting another number of shares, ``level`` lets the lagging shares of the number
that wrote them catch up with the foremost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
from collections.abc import Callable

from rich.console import Console
from rich.logging import RichHandler
from sqlalchemy import Engine, select

from projections.registry import build_projections
from projections.tables import checkpoints
from services.log import ClaimLog
from services.log.servers import connect
from services.projector.live import Projector
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.rebuild.generations import Generations
from services.runtime.compose import nats_tls, run, stream_spec
from services.runtime.settings import Settings

log = logging.getLogger(__name__)
STOP_SECONDS = 30.0  # how long a share may take to finish its batch and stop before it is killed


def consumer_name(projector_name: str, share: int, shares: int) -> str:
    """The durable consumer of one share (the projector's own name when it runs as one process)."""
    return projector_name if shares == 1 else f"{projector_name}-s{share}of{shares}"


async def level(claim_log: ClaimLog, engine: Engine, *, shares: int, name: str, batch: int) -> None:
    """Bring checkpoints written for another number of shares than ``shares`` to one position, so that
    the shares about to start can divide them anew: each lagging share of the old number catches up
    with the foremost, as that share's projector would have. The old number's durable consumers,
    which nothing will read again, are deleted."""
    names = [p.name for p in build_projections()]
    with engine.connect() as conn:
        rows = conn.execute(select(checkpoints).where(checkpoints.c.name.in_(names))).all()
    written_for = {row.shares for row in rows}
    if not rows or written_for == {shares} or len(written_for) > 1:
        return  # nothing to divide, or nothing this can mend (load_checkpoint says what is wrong)
    old = written_for.pop()
    head = max(row.last_seq for row in rows)
    for share in range(old):
        if all(row.last_seq == head for row in rows if row.share == share):
            continue
        leveller = f"{name}-level-s{share}of{old}"
        log.info("share %s of %s stands behind sequence %s: bringing it there before CLAIMLOG_PROJECTOR_SHARES=%s runs", share, old, head, shares)
        writer = CheckpointedWriter(engine, build_projections(), partitions=old)
        projector = Runner(claim_log, writer, name=leveller, batch=batch, scope=Scope(share=(share, old), stop_at=head))
        try:
            await projector.run_until(head, timeout=None)
        finally:
            await claim_log.forget_consumer(leveller)
    for share in range(old):
        await claim_log.forget_consumer(consumer_name(name, share, old))


class Shares:
    """The share processes of one projector: started together, stopped together, and any one failing
    stops them all (the supervisor, or the operator, starts the projector again)."""

    def __init__(self, settings: Settings, nats_url: str) -> None:
        self._settings, self._nats_url = settings, nats_url
        self._context = multiprocessing.get_context("spawn")
        self._processes: list[multiprocessing.process.BaseProcess] = []

    async def run(self, stop: asyncio.Event) -> None:
        """Run every share until ``stop`` is set; raises when a share stops on its own."""
        shares = self._settings.projector_shares
        level_name = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        self._processes = [
            self._context.Process(
                target=share_main,
                args=(self._settings.model_dump(mode="json"), self._nats_url, share, shares, level_name),
                name=f"claimlog-projector-s{share}of{shares}",
            )
            for share in range(shares)
        ]
        for process in self._processes:
            process.start()
        log.info("projector running as %s processes, one share of the claims each", shares)
        try:
            while not stop.is_set():
                ended = [p for p in self._processes if not p.is_alive()]
                if ended and all(p.exitcode == 0 for p in ended):
                    # Stopped cleanly: by Ctrl-C, which reaches the whole process group, when this
                    # process is told to stop too a moment later. Otherwise its claims would go unprojected.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=STOP_SECONDS / 10)
                    if stop.is_set():
                        break
                if ended:
                    names = ", ".join(f"{p.name} (exit code {p.exitcode})" for p in ended)
                    raise RuntimeError(f"projector share {names} stopped; its log is above")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=0.5)
        finally:
            await asyncio.to_thread(self.stop)

    def stop(self) -> None:
        """Ask every share to finish its batch and stop; kill one that does not within ``STOP_SECONDS``."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()  # SIGTERM: the share stops at its next batch
        for process in self._processes:
            process.join(STOP_SECONDS)
            if process.is_alive():
                log.warning("%s did not stop within %ss: killing it", process.name, STOP_SECONDS)
                process.kill()
                process.join()


def share_main(settings_fields: dict, nats_url: str, share: int, shares: int, level_name: str) -> None:
    """A share's process: fold share ``share`` of ``shares`` of the claims until told to stop."""
    handler = RichHandler(console=Console(stderr=True), show_path=False)
    logging.basicConfig(level=level_name, format=f"[share {share}/{shares}] %(message)s", handlers=[handler])
    run(fold_share(Settings(**settings_fields), nats_url, share, shares))


async def fold_share(settings: Settings, nats_url: str, share: int, shares: int) -> None:
    stop = asyncio.Event()
    _stop_on_signals_and_parent_exit(stop.set)
    name = consumer_name(settings.projector_name, share, shares)
    nc = await connect(nats_url, name=f"claimlog-{name}", first_connect_seconds=settings.nats_connect_seconds, tls=nats_tls(settings))
    generations = Generations(settings.resolved_database_url())
    try:
        active = generations.engine(generations.active_number())  # the projector follows the generation switches
        projector = Projector(
            ClaimLog(nc, stream_spec(settings)), active, build_projections(), name=name, batch=settings.projector_batch,
            generations=generations, share=(share, shares),
        )
        await projector.run(stop)
    finally:
        generations.close()
        await nc.close()


def _stop_on_signals_and_parent_exit(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT (Ctrl-C reaches the whole process group) stop the share after its batch; so
    does its parent's exit, even by SIGKILL, so that no share goes on writing unsupervised."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    parent = multiprocessing.parent_process()
    if parent is not None:
        loop.add_reader(parent.sentinel, stop)
