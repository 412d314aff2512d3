"""The key-value buckets claimlog keeps beside a registry's log: what each holds and how it is made
(``KINDS``), the one place one is opened or made (``open_bucket``), and its keys listed in one request.

Every bucket is opened here, so each is made the same way wherever it is first needed: with the
registry's copies (tried again while a cluster's peers are still joining), its history and its
description, its entries' lifetime for the leases. Its name is ``services/log/names.py``'s.

nats-py lists a bucket's keys through ``KeyValue.keys()``, a watcher made for each look: on a busy
machine it can signal its end before its entries arrive (a revocation then found no token), and making
and removing it at every look costs a projector worker's event loop enough to show in latency. The
bucket's stream answers the same question in one request: ``stream_info`` with a subjects filter names
every subject that still holds a value (a key deleted with purge, or aged out by the bucket's ttl, is
gone from it).
"""

from __future__ import annotations

from dataclasses import dataclass

from nats.js.api import KeyValueConfig, StorageType
from nats.js.client import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from events.subjects import DEFAULT_STREAM
from services.log.names import (
    ACTORS,
    KEYS,
    LEASES,
    RATES,
    SLUGS,
    TLOG,
    bucket_name,
    bucket_stream,
    key_subject,
)
from services.log.replication import placed


@dataclass(frozen=True)
class Kind:
    """One kind of bucket: what it holds, in words (``claimlog status``, refusals) and as its description on
    the server, how many values of a key it keeps, whether it is read directly (any copy answers a get) and
    whether it takes atomic batches."""

    what: str
    description: str
    history: int = 1
    direct: bool = True
    batches: bool = False


KINDS = {
    ACTORS: Kind("the token store", "claimlog actors and the hashes of their bearer tokens", history=16),
    KEYS: Kind("the key registry", "claimlog signing keys (public) and the signing requirement", history=16),
    # A bulk ingest takes a thousand slugs with one synced acknowledgement (services/commands/slugs.py).
    SLUGS: Kind("the slugs' owners", "claimlog: the claim each slug belongs to", batches=True),
    RATES: Kind("the shared rate limit", "claimlog: each actor's writes left (the shared rate limit)"),
    LEASES: Kind("the partition leases", "claimlog projector workers and the partitions each folds", direct=False),
    # Its tiles are an object store beside it (services/log/tlog_store.py), rehashed from the log when lost.
    TLOG: Kind("the transparency log's tree", "claimlog: the transparency log's tree, signed checkpoint, lease and status"),
}


async def find_bucket(js: JetStreamContext, kind: str, *, stream: str = DEFAULT_STREAM) -> KeyValue | None:
    """The bucket of ``kind`` of the registry on ``stream``, or None when it is not made yet."""
    return await find_named(js, bucket_name(kind, stream))


async def find_named(js: JetStreamContext, name: str) -> KeyValue | None:
    """The bucket called ``name``, or None when it is not made yet."""
    try:
        return await js.key_value(name)
    except (BucketNotFoundError, NotFoundError):
        return None


async def open_bucket(js: JetStreamContext, kind: str, *, stream: str = DEFAULT_STREAM, replicas: int = 1, ttl: float | None = None) -> KeyValue:
    """The bucket of ``kind`` of the registry on ``stream``, made when missing with ``replicas`` copies (and
    entries living ``ttl`` seconds, for the leases); making one needs the admin's rights, or no roles."""
    return await open_named(js, kind, bucket_name(kind, stream), replicas=replicas, ttl=ttl)


async def open_named(js: JetStreamContext, kind: str, name: str, *, replicas: int = 1, ttl: float | None = None) -> KeyValue:
    """``open_bucket`` of a bucket of ``kind`` by its name (as ``services/log/names.py`` gives it)."""
    found = await find_named(js, name)
    if found is not None:
        return found
    spec = KINDS[kind]
    config = KeyValueConfig(
        bucket=name, history=spec.history, storage=StorageType.FILE, replicas=replicas, direct=spec.direct,
        description=spec.description, ttl=ttl,
    )
    kv = await placed(lambda: js.create_key_value(config), what=f"{spec.what} (bucket {name})", wanted=replicas)
    if spec.batches:
        await allow_batches(js, name)
    return kv


async def allow_batches(js: JetStreamContext, bucket: str) -> None:
    """Let the bucket take atomic batches. Changing a bucket's stream is the admin's (or a process without roles)."""
    info = await js.stream_info(bucket_stream(bucket))
    if not info.config.allow_atomic:
        info.config.allow_atomic = True
        await js.update_stream(info.config)


async def bucket_keys(js: JetStreamContext, bucket: str, prefix: str = "") -> list[str]:
    """The keys of ``bucket`` that start with ``prefix`` and hold a value, sorted; none if the bucket
    does not exist. ``prefix`` ends at a token boundary (``"token."``) or is empty for every key."""
    subjects = key_subject(bucket, "")
    try:
        info = await js.stream_info(bucket_stream(bucket), subjects_filter=key_subject(bucket, f"{prefix}>"))
    except NotFoundError:
        return []
    return sorted(subject.removeprefix(subjects) for subject in info.state.subjects or {})
