"""The projector: folds the log into the read models, one transaction per batch with its checkpoint."""

from services.projector.errors import FencingError
from services.projector.projector import LiveProjector, Projector
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter, Committed, Refused

__all__ = ["CheckpointedWriter", "Committed", "FencingError", "LiveProjector", "Projector", "Refused", "Runner", "Scope"]
