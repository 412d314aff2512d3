"""The projector's leases bucket as JetStream keeps it: made when missing, its lease time set again when
it changed. The start-up makes it as admin (``services/runtime/compose.py``); the leases themselves,
and how workers divide the partitions, are the projector's (``services/projector/leases.py``)."""

from __future__ import annotations

from dataclasses import replace

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from services.log.names import LEASES, bucket_stream

BUCKET = LEASES


async def ensure_bucket(js: JetStreamContext, *, ttl: float, replicas: int = 1, bucket: str = BUCKET) -> KeyValue:
    """The leases bucket, made when missing; entries live ``ttl`` seconds (CLAIMLOG_LEASE_SECONDS), set
    again when the bucket was made with another lease time (``claimlog up`` and the deploy's stream
    service do this as admin; a projector may read and write the bucket, not make or change it)."""
    try:
        kv = await js.key_value(bucket)
    except (BucketNotFoundError, NotFoundError):
        config = KeyValueConfig(
            bucket=bucket, history=1, ttl=ttl, storage=StorageType.FILE, replicas=replicas,
            description="claimlog projector workers and the partitions each folds",
        )
        return await js.create_key_value(config)
    info = await js.stream_info(bucket_stream(bucket))
    if info.config.max_age != ttl:
        window = min(info.config.duplicate_window or ttl, ttl)  # the server refuses a window longer than the entries live
        await js.update_stream(replace(info.config, max_age=ttl, duplicate_window=window))
    return kv


async def bucket_ttl(js: JetStreamContext, bucket: str = BUCKET) -> float | None:
    """How long the leases bucket keeps an entry not written again (the lease time), or ``None`` when it is not made yet."""
    try:
        info = await js.stream_info(bucket_stream(bucket))
    except NotFoundError:
        return None
    return info.config.max_age
