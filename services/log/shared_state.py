"""What every API process writing to one registry must agree on, kept in JetStream key-value buckets.

Two things the command side decides cannot live in one process's memory once several API processes
write: which claim a slug belongs to, and how many writes an actor has left. Both are kept in a
bucket beside the log (``<kind>`` for the default stream, ``<kind>_<stream>`` for another registry's),
where JetStream's compare-and-set (``create``: only if absent; ``update``: only at this revision)
makes two processes racing for one key end with one winner. PostgreSQL would do the same, but the
read models' database is rebuilt into generations and may be a SQLite file per host; the log's own
server is the one thing every writer already shares.

The admin creates the buckets at start-up (``claimlog up``, the deployment's ``stream`` job); a
process that may create them (no roles, as in tests and the embedded default) makes a missing one
(``services/log/buckets.py``, where every bucket is opened).
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client
from nats.js.kv import KeyValue

from events.subjects import DEFAULT_STREAM
from services.log.buckets import open_bucket
from services.log.names import bucket_name


class LazyBucket:
    """A bucket opened on first use (the API starts before it needs one), once per process."""

    def __init__(self, nc: Client, kind: str, *, stream: str = DEFAULT_STREAM, replicas: int = 1) -> None:
        self._nc, self._kind, self._stream, self._replicas = nc, kind, stream, replicas
        self._kv: KeyValue | None = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        """The bucket's name."""
        return bucket_name(self._kind, self._stream)

    async def __call__(self) -> KeyValue:
        if self._kv is None:
            async with self._lock:
                if self._kv is None:
                    self._kv = await open_bucket(self._nc.jetstream(), self._kind, stream=self._stream, replicas=self._replicas)
        return self._kv
