"""The live projector: a runner that keeps the active read-model generation and follows a switch."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import Engine

from projections.base import Projection
from services.log import ClaimLog
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.store.generations import Generations

log = logging.getLogger(__name__)


class Projector(Runner):
    """Keeps a set of projections up to date with the log, one batch at a time as events arrive.

    With ``generations``, it keeps the active generation's tables and moves to a new one within
    ``FOLLOW_EVERY`` seconds of a switch (``claimlog replay``), resuming at that generation's checkpoint.
    With ``partition``, it folds that partition of the log only, committing its checkpoint row at
    ``epoch``; with ``epochs`` (partition -> epoch), those partitions, each batch's events of all of them
    in one commit (a worker's leases: ``services/projector/worker.py``).
    """

    def __init__(
        self,
        log_: ClaimLog,
        engine: Engine,
        projections: Sequence[Projection],
        *,
        name: str,
        batch: int,
        generations: Generations | None = None,
        share: tuple[int, int] = (0, 1),
        partition: int | None = None,
        epoch: int = 0,
        epochs: dict[int, int] | None = None,
    ) -> None:
        self._projections, self._generations = list(projections), generations
        self.generation = generations.active_number() if generations is not None else 0
        if generations is not None:
            engine = generations.engine(self.generation)
        scope = Scope(share=share, partition=partition, partitions=tuple(sorted(epochs)) if epochs is not None else None)
        self._partitions = share[1] if scope.parts is None else log_.layout.partitions
        writer = CheckpointedWriter(engine, self._projections, partitions=self._partitions)
        super().__init__(log_, writer, name=name, batch=batch, scope=scope, epoch=epoch, epochs=epochs)
        self.follows = generations is not None

    def _switched(self) -> bool:
        """Whether another generation became the active one; if so, write to it from now on."""
        assert self._generations is not None
        active = self._generations.active_number()
        if active == self.generation:
            return False
        log.info("read-model generation %s is now active (was %s): following it", active, self.generation)
        self.writer.forget()
        self.writer.close()
        self.generation = active
        self.writer = CheckpointedWriter(self._generations.engine(active), self._projections, partitions=self._partitions)
        return True
