"""What ``claimlog up`` checks before it changes anything, so that a start it refuses leaves the data directory
as it found it, and the release that wrote it still starts on it.

The read-model database first, before NATS starts (a schema revision this code does not know: a newer claimlog
wrote it); then, on the running server, the stream (one that can lose events, or partitioned otherwise than
CLAIMLOG_PARTITIONS) and the copies asked for (more than the data directory's own servers can hold). Only then
does ``claimlog up`` migrate the database and make or raise the streams and buckets.
"""

from __future__ import annotations

from pathlib import Path

from services.log import LogConfigError, connect
from services.log.stream import check_existing
from services.runtime.cluster import cluster_nodes
from services.runtime.db import make_engine, require_known_revision
from services.runtime.from_settings import nats_replicas, nats_server, nats_tls, stream_spec
from services.runtime.settings import Settings

UNCHANGED = "Nothing was changed."


def check_database(settings: Settings) -> None:
    """Refuse a read-model database of a newer claimlog, reading it only; a missing one passes (``up`` makes it)."""
    engine = make_engine(settings.resolved_database_url(), create=False)
    try:
        path = engine.url.database
        if engine.dialect.name == "sqlite" and not (path and path != ":memory:" and Path(path).exists()):
            return
        require_known_revision(engine)
    finally:
        engine.dispose()


async def check_log(settings: Settings) -> None:
    """Refuse, reading only, what making or raising the streams would refuse once the database is migrated."""
    try:
        check_replicas(settings)
        async with nats_server(settings, role="admin") as url:
            nc = await connect(url, name="claimlog-preflight", first_connect_seconds=settings.nats_connect_seconds, tls=nats_tls(settings))
            try:
                await check_existing(nc, stream_spec(settings))
            finally:
                await nc.close()
    except LogConfigError as error:
        raise LogConfigError(f"{error} {UNCHANGED}") from None


def check_replicas(settings: Settings) -> None:
    """Refuse more copies of each stream than the data directory's own NATS has servers to hold them."""
    if settings.nats_url:  # a deployment's servers: they say so themselves when a stream is made or raised
        return
    servers, wanted = cluster_nodes(settings.data_dir) or 1, nats_replicas(settings)
    if wanted > servers:
        raise LogConfigError(
            f"CLAIMLOG_NATS_REPLICAS is {wanted}, but the NATS of {settings.data_dir.resolve()} has {servers} server(s) "
            f"to hold the copies: set CLAIMLOG_NATS_REPLICAS={servers}, or run a local cluster "
            "(`claimlog up --cluster 3`) in another data directory and carry the log over (docs/operations.md)."
        )
