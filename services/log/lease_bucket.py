"""The projector's leases bucket as JetStream keeps it: made when missing, its lease time set again when
it changed. The start-up makes it as admin (``services/runtime/from_settings.py``); the leases themselves,
and how workers divide the partitions, are the projector's (``services/projector/leases.py``)."""

from __future__ import annotations

from dataclasses import replace

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from nats.js.kv import KeyValue

from services.log.buckets import find_named, open_named
from services.log.names import LEASES, bucket_stream

BUCKET = LEASES


async def ensure_bucket(js: JetStreamContext, *, ttl: float, replicas: int = 1, bucket: str = BUCKET) -> KeyValue:
    """The leases bucket, made when missing; entries live ``ttl`` seconds (CLAIMLOG_LEASE_SECONDS), set
    again when the bucket was made with another lease time (``claimlog up`` and the deploy's stream
    service do this as admin; a projector may read and write the bucket, not make or change it)."""
    kv = await find_named(js, bucket)
    if kv is None:
        return await open_named(js, LEASES, bucket, replicas=replicas, ttl=ttl)
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
