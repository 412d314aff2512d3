"""The projector: a runner that keeps one set of read-model tables, or the active generation's.

``Projector`` folds the whole log (or, with ``epochs``, those partitions, each at its owner's epoch)
into one engine's tables; ``LiveProjector`` does the same into the active read-model generation and
moves to a new one when ``claimlog replay`` switches to it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from sqlalchemy import Engine

from projections.base import Projection
from services.log import ClaimLog
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.store.generations import Generations

log = logging.getLogger(__name__)


class Projector(Runner):
    """Keeps a set of projections up to date with the log, one batch at a time as events arrive.

    Without ``epochs`` it folds the whole log, with one checkpoint row per projection. With ``epochs``
    (partition -> the owner's epoch: a worker's leases, ``services/projector/worker.py``) it folds those
    partitions only, each batch's events of all of them in one commit, each partition's checkpoint
    fenced by its epoch.
    """

    def __init__(
        self, log_: ClaimLog, engine: Engine, projections: Sequence[Projection], *, name: str, batch: int,
        epochs: Mapping[int, int] | None = None,
    ) -> None:
        self._projections = list(projections)
        self._partitions = 1 if epochs is None else log_.layout.partitions
        scope = Scope() if epochs is None else Scope(partitions=tuple(sorted(epochs)))
        writer = CheckpointedWriter(engine, self._projections, partitions=self._partitions)
        super().__init__(log_, writer, name=name, batch=batch, scope=scope, epochs=dict(epochs) if epochs is not None else None)


class LiveProjector(Projector):
    """A ``Projector`` of the active read-model generation: it moves to a new one within ``FOLLOW_EVERY``
    seconds of a switch (``claimlog replay``), resuming at that generation's checkpoint."""

    follows = True

    def __init__(
        self, log_: ClaimLog, generations: Generations, projections: Sequence[Projection], *, name: str, batch: int,
        epochs: Mapping[int, int] | None = None,
    ) -> None:
        self._generations = generations
        self.generation = generations.active_number()
        super().__init__(log_, generations.engine(self.generation), projections, name=name, batch=batch, epochs=epochs)

    def _switched(self) -> bool:
        """Whether another generation became the active one; if so, write to it from now on."""
        active = self._generations.active_number()
        if active == self.generation:
            return False
        log.info("read-model generation %s is now active (was %s): following it", active, self.generation)
        self.writer.forget()
        self.writer.close()
        self.generation = active
        self.writer = CheckpointedWriter(self._generations.engine(active), self._projections, partitions=self._partitions)
        return True
