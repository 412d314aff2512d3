"""What every projection is: a named, versioned fold of log records into its own tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import Connection, Table

from events import Event


@dataclass(frozen=True)
class Record:
    """An event at its place in the log."""

    seq: int
    at: datetime
    event: Event


class Projection(Protocol):
    """A read model the projector keeps: it writes only its own tables, inside the projector's transaction."""

    name: str
    version: int
    tables: tuple[Table, ...]

    def apply_batch(self, conn: Connection, records: Sequence[Record]) -> None:
        """Fold a batch of records (in log order) into the tables, on the given connection."""

    def forget(self) -> None:
        """Drop anything held in memory: the transaction it was built for did not commit."""
