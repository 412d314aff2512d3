"""What every API process writing to one registry must agree on, kept in JetStream key-value buckets.

Two things the command side decides cannot live in one process's memory once several API processes
write: which claim a slug belongs to, and how many writes an actor has left. Both are kept in a
bucket beside the log (``<kind>`` for the default stream, ``<kind>_<stream>`` for another registry's),
where JetStream's compare-and-set (``create``: only if absent; ``update``: only at this revision)
makes two processes racing for one key end with one winner. PostgreSQL would do the same, but the
read models' database is rebuilt into generations and may be a SQLite file per host; the log's own
server is the one thing every writer already shares.

The admin creates the buckets at start-up (``claimlog up``, the deployment's ``stream`` job); a
process that may create them (no roles, as in tests and the embedded default) makes a missing one.
"""

from __future__ import annotations

import asyncio

from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from events.subjects import DEFAULT_STREAM
from services.log.names import RATES, SLUGS, bucket_name, bucket_stream
from services.log.replication import placed

DESCRIPTIONS = {SLUGS: "the claim each slug belongs to", RATES: "each actor's writes left (the shared rate limit)"}


async def open_bucket(nc: Client, kind: str, *, stream: str = DEFAULT_STREAM, replicas: int = 1) -> KeyValue:
    """The bucket, made with ``replicas`` copies when missing."""
    js, name = nc.jetstream(), bucket_name(kind, stream)
    try:
        return await js.key_value(name)
    except (BucketNotFoundError, NotFoundError):
        config = KeyValueConfig(bucket=name, history=1, storage=StorageType.FILE, replicas=replicas, direct=True,
                                description=f"claimlog: {DESCRIPTIONS[kind]}")
        kv = await placed(lambda: js.create_key_value(config), what=f"bucket {name}", wanted=replicas)
        if kind == SLUGS:
            await allow_batches(nc, name)
        return kv


async def allow_batches(nc: Client, bucket: str) -> None:
    """Let the bucket take atomic batches: a bulk ingest takes a thousand slugs with one synced acknowledgement
    (``services/commands/slugs.py``). Changing a bucket's stream is the admin's (or a process without roles)."""
    js = nc.jetstream()
    info = await js.stream_info(bucket_stream(bucket))
    if not info.config.allow_atomic:
        info.config.allow_atomic = True
        await js.update_stream(info.config)


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
                    self._kv = await open_bucket(self._nc, self._kind, stream=self._stream, replicas=self._replicas)
        return self._kv
