"""The projector: folds the log into the read models, one transaction per batch with its checkpoint."""

from services.projector.runner import FencingError, Projector

__all__ = ["FencingError", "Projector"]
