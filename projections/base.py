"""What every projection is: a named, versioned fold of log records into its own tables."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from sqlalchemy import Connection, Table

from events import Event


class Record(NamedTuple):
    """An event at its place in the log. (A named tuple: immutable, and cheaper to build than a
    frozen dataclass, once per event the projector applies.)"""

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
