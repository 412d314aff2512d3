"""Composition helpers: open the log (embedded or remote) and the database from one Settings object."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import nats.errors

from events.subjects import LogLayout
from services.log import ClaimLog, LogConfigError, NatsTls, StreamSpec, connect
from services.log.buckets import KINDS, allow_batches, open_bucket
from services.log.durability import warn_if_server_not_synced
from services.log.lease_bucket import ensure_bucket as ensure_leases
from services.log.names import ACTORS, KEYS, LEASES, RATES, SLUGS, bucket_name, leases_bucket
from services.log.replication import ensure_bucket_replicas
from services.log.signing import Signer
from services.log.tlog_store import TlogStore
from services.runtime.cluster import LocalCluster, cluster_nodes
from services.runtime.embedded import EmbeddedNats, running_url
from services.runtime.local_ca import local_ca_file
from services.runtime.registry_key import registry_key_file
from services.runtime.settings import Settings

log = logging.getLogger(__name__)
# Every key-value bucket claimlog keeps beside the log, raised to CLAIMLOG_NATS_REPLICAS at start-up.
# (The token store's bucket is the stream's own: ``actors_bucket``.)
T = TypeVar("T")
# The roles that append: each signs with CLAIMLOG_SIGNING_KEY when it is set (the API's delegate key, a
# direct producer's own).
SIGNING_ROLES = ("admin", "writer", "producer")


def stream_spec(settings: Settings) -> StreamSpec:
    """The stream claimlog runs on, from settings."""
    server_sync = None if settings.nats_url else settings.nats_sync  # the embedded server's, which claimlog configures
    layout = LogLayout(settings.subject_prefix, settings.partitions)
    return StreamSpec(settings.stream, nats_replicas(settings), settings.duplicate_window_seconds, server_sync, layout)


def nats_replicas(settings: Settings) -> int:
    """CLAIMLOG_NATS_REPLICAS; on the data directory's own cluster, at least as many as it has nodes (up to 3)."""
    nodes = None if settings.nats_url else cluster_nodes(settings.data_dir)
    return max(settings.nats_replicas, min(nodes or 1, 3))


def nats_tls(settings: Settings) -> NatsTls | None:
    """How this process secures its NATS connections: CLAIMLOG_NATS_TLS_CA (and a client certificate) when set;
    else, on the data directory's own local cluster, its authority; else none (the embedded single server
    listens on loopback only, in plain text, as it always has)."""
    if settings.nats_tls_ca or settings.nats_tls_cert:
        return NatsTls(settings.nats_tls_ca, settings.nats_tls_cert, settings.nats_tls_key)
    if not settings.nats_url and cluster_nodes(settings.data_dir) and local_ca_file(settings.data_dir).exists():
        return NatsTls(ca=local_ca_file(settings.data_dir).resolve())
    return None


def tls_env(settings: Settings) -> dict[str, str]:
    """The TLS settings a child process needs to reach the same NATS (which the child finds by its URL alone)."""
    tls = nats_tls(settings)
    if tls is None:
        return {}
    named = {"CLAIMLOG_NATS_TLS_CA": tls.ca, "CLAIMLOG_NATS_TLS_CERT": tls.cert, "CLAIMLOG_NATS_TLS_KEY": tls.key}
    return {name: str(path) for name, path in named.items() if path is not None}


@asynccontextmanager
async def nats_server(settings: Settings, *, role: str = "admin") -> AsyncIterator[str]:
    """The NATS URL to use: CLAIMLOG_NATS_URL as it is, else ``role``'s URL on the data directory's embedded server.

    The embedded server is started if none is running, and stopped on exit. A reader or projector
    (``show``, ``history``, ``export``, ``verify``, ``replay``) on a data directory that holds no log
    yet is told so, and nothing starts.
    """
    url = settings.nats_url or running_url(settings.data_dir, role, settings.stream)
    if url is not None:
        yield url
        return
    if role in ("reader", "projector") and not holds_log(settings.data_dir):
        raise LogConfigError(
            f"no claim log in {settings.data_dir.resolve()} yet: `claimlog up` or `claimlog ingest` starts one there "
            "(or set CLAIMLOG_DATA_DIR, or CLAIMLOG_NATS_URL, to where the log is)"
        )
    server = local_server(settings)
    await asyncio.to_thread(server.start)
    try:
        yield server.url_for(role)
    finally:
        await asyncio.to_thread(server.stop)


def local_server(settings: Settings, *, cluster: int | None = None) -> EmbeddedNats | LocalCluster:
    """The data directory's own NATS: its local cluster when it holds one (or ``cluster`` nodes are asked
    for), else the single embedded server."""
    size = cluster or cluster_nodes(settings.data_dir)
    if size:
        return LocalCluster(
            settings.data_dir, size=size, sync=settings.nats_sync, stream=settings.stream, prefix=settings.subject_prefix
        )
    return EmbeddedNats(settings.data_dir, sync=settings.nats_sync, stream=settings.stream, prefix=settings.subject_prefix)


def holds_log(data_dir: Path) -> bool:
    """Whether the data directory holds a store of the embedded server or of a local cluster's first node."""
    return (data_dir / "jetstream").is_dir() or (data_dir / "node-1" / "jetstream").is_dir()


@asynccontextmanager
async def open_log(
    settings: Settings, *, client_name: str = "claimlog", role: str = "admin", create: bool | None = None
) -> AsyncIterator[ClaimLog]:
    """The claim log on the NATS server ``nats_server`` picks for ``role``, its stream verified.

    Only the admin role may create or change the stream. On the embedded default claimlog runs the
    server itself, so a writer's command (``claimlog ingest`` on a new data directory) has it created
    as admin first; on a server of one's own, that is the deployment's one-shot ``stream`` job. A
    reader, or a caller passing ``create=False`` (``verify``), never creates it, whatever the URL's user.
    A direct producer in Python opens the log as ``producer`` (its URL the producer user's, its
    ``CLAIMLOG_SIGNING_KEY`` its own key) and appends through it.
    """
    async with nats_server(settings, role=role) as url:
        if role == "writer" and not settings.nats_url:
            await ensure_log(settings)
        nc = await connect(url, name=client_name, first_connect_seconds=settings.nats_connect_seconds, tls=nats_tls(settings))
        try:
            claim_log = ClaimLog(nc, stream_spec(settings), signer=signer_of(settings) if role in SIGNING_ROLES else None)
            await ready(claim_log, create=role != "reader" if create is None else create)
            yield claim_log
        finally:
            await nc.drain()


def signer_of(settings: Settings) -> Signer | None:
    """The key this process signs its appends with (``signing_key_file``), or None."""
    path = signing_key_file(settings)
    return None if path is None else Signer.from_file(path)


def signing_key_file(settings: Settings) -> Path | None:
    """``CLAIMLOG_SIGNING_KEY``; unset, on the data directory's own NATS, the registry's delegate key that
    ``claimlog up`` keeps there (services/runtime/registry_key.py) when there is one; else None."""
    if settings.signing_key is not None:
        return settings.signing_key
    kept = registry_key_file(settings.data_dir, settings.stream)
    return kept if settings.nats_url is None and kept.is_file() else None


async def ready(claim_log: ClaimLog, *, create: bool = True) -> None:
    """Create (when ``create``) or verify the stream; a NATS user that may not create or update it is told who can."""
    try:
        await claim_log.ensure(create=create)
    except (nats.errors.TimeoutError, TimeoutError):
        refused = claim_log.nc.last_error
        if refused is None or "permissions violation" not in str(refused).lower():
            raise
        raise LogConfigError(
            f"stream {claim_log.stream} is missing or needs changing, and this NATS user may not do it ({refused}). "
            "Run `claimlog up`, or create the stream as admin."
        ) from None


async def ensure_log(settings: Settings) -> None:
    """Create or verify the stream, and the replicas of the token store, as admin (``claimlog up``, ``claimlog ingest`` on the embedded default, and the
    deploy's one-shot ``stream`` service)."""
    async with open_log(settings, client_name="claimlog-stream", role="admin") as claim_log:
        buckets = {bucket_name(kind, claim_log.stream): KINDS[kind].what for kind in (LEASES, ACTORS, KEYS, SLUGS, RATES)}
        for kind in (SLUGS, RATES):  # the writers share them but may not create them
            await open_bucket(claim_log.nc.jetstream(), kind, stream=claim_log.stream, replicas=claim_log.spec.replicas)
        await allow_batches(claim_log.nc.jetstream(), bucket_name(SLUGS, claim_log.stream))  # a bucket made before slugs went in batches
        await ensure_bucket_replicas(claim_log.nc, buckets, claim_log.spec.replicas)
        await TlogStore.open(claim_log.nc, claim_log.stream, replicas=claim_log.spec.replicas)  # the transparency log's
        if claim_log.layout.partitioned:  # the workers' leases, with the lease time of CLAIMLOG_LEASE_SECONDS
            await ensure_leases(
                claim_log.nc.jetstream(), ttl=settings.lease_seconds, replicas=claim_log.spec.replicas, bucket=leases_bucket(claim_log.stream)
            )
        if settings.nats_url:  # a server claimlog did not configure: ask it (as admin, once) whether it syncs
            await warn_if_server_not_synced(claim_log.nc)


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a process's main coroutine, on uvloop where it is installed (it comes with uvicorn[standard]).

    The ingest and projector loops are per-event asyncio work (futures, callbacks, socket reads), which
    uvloop does in C; the API already runs on it through uvicorn.
    """
    tune_gc()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def tune_gc() -> None:
    """Collect cyclic garbage far less often than Python's default (every 700 net allocations).

    A projector keeps tens of thousands of pages in memory, and every collection of the older
    generations walks them: with the defaults, collections take a large share of a replay's time
    (bench/backlog.py and bench/replay.py show it). What is alive once the process has started (modules,
    validators) is frozen out of collection altogether. Cycles are still collected, just in bigger steps.
    """
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 100)


# A projector allocates about 150 objects per event it folds, most of them alive until its batch is
# written: at 50,000 a young collection every few hundred events walked them. 200,000 walks them
# four times less often (counted with callgrind: docs/architecture.md); the cyclic garbage waiting
# between collections stays in the tens of megabytes at most.
GC_YOUNG_THRESHOLD = 200_000
