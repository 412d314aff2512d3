"""The projector: folds the log into the read models, one transaction per batch with its checkpoint."""

from services.projector.errors import FencingError
from services.projector.live import Projector
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter, Committed, Refused

__all__ = ["CheckpointedWriter", "Committed", "FencingError", "Projector", "Refused", "Runner", "Scope"]
