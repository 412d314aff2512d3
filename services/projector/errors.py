"""What stops the projector, what it retries, and what no poison event can be."""

from __future__ import annotations

import nats.errors
import nats.js.errors
from sqlalchemy.exc import OperationalError

from services.log import LogError
from services.projector.parking import SYSTEMIC

# Failures that pass: the database or NATS is restarting. Anything else stops the projector.
TRANSIENT = (OperationalError, nats.errors.Error, nats.js.errors.Error, LogError, TimeoutError)


class FencingError(RuntimeError):
    """Another projector moved the checkpoint, or a newer owner took the partition: this one must stop writing."""

    def __init__(self, reason: str, partition: int | None = None) -> None:
        super().__init__(reason)
        self.partition = partition  # the partition lost, when the refusal named one


class CannotIsolateError(RuntimeError):
    """A batch failed in a fold that cannot roll back what it holds in memory (a rebuild's write-behind
    worker), so the failing claim cannot be found and parked here: fold again without write-behind."""


# Failures that are no poison event: everything but these, raised by a projection, parks a claim.
NEVER_PARK = (*TRANSIENT, *SYSTEMIC, FencingError, CannotIsolateError)
