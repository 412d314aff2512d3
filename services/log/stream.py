"""Create the claim stream, or verify an existing one is a log that cannot be altered."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js.api import RetentionPolicy, StorageType, StreamConfig, StreamInfo
from nats.js.errors import APIError, NotFoundError

from events.subjects import ALL_EVENTS
from services.log.durability import warn_if_not_durable
from services.log.errors import LogConfigError
from services.log.replication import cannot_hold, ensure_replicas

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamSpec:
    """What claimlog needs of its stream."""

    name: str
    replicas: int = 1
    duplicate_window: float = 300.0
    # The server's JetStream sync_interval when claimlog configured the server itself (embedded), else None.
    server_sync: str | None = None

    def config(self) -> StreamConfig:
        """The stream configuration claimlog creates."""
        return StreamConfig(
            name=self.name,
            description="claimlog: the immutable log of research-claim events",
            subjects=[ALL_EVENTS],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=self.replicas,
            max_msgs=-1,
            max_bytes=-1,
            max_age=0,
            max_msgs_per_subject=-1,
            duplicate_window=self.duplicate_window,
            deny_delete=True,
            deny_purge=True,
            allow_rollup_hdrs=False,
            allow_direct=True,
            allow_atomic=True,
        )


async def ensure_stream(nc: Client, spec: StreamSpec, *, create: bool = True) -> StreamInfo:
    """Create the stream if it is missing (``create``; else say so); refuse, with the reason, one that lets events be removed;
    raise its replicas to the spec's (``create``; else refuse fewer); warn loudly about one that a crash could take
    acknowledged events from (not replicated, or not synced)."""
    js = nc.jetstream()
    try:
        info = await js.stream_info(spec.name)
    except NotFoundError:
        if not create:
            raise LogConfigError(
                f"stream {spec.name} does not exist on this NATS server yet: `claimlog up` creates it "
                "(or the deployment's `stream` job, as admin)"
            ) from None
        log.info("creating stream %s with %s replica(s)", spec.name, spec.replicas)
        try:
            info = await js.add_stream(spec.config())
        except APIError as error:
            raise cannot_hold(f"stream {spec.name}", spec.replicas, error) from None
        warn_if_not_durable(nc, info, sync=spec.server_sync)
        return info
    problems = alteration_risks(info.config)
    if problems:
        raise LogConfigError(
            f"stream {spec.name} can lose or rewrite events: {'; '.join(problems)}. "
            "claimlog refuses to run on it: the log is its only source of truth. "
            "Fix the stream's configuration (or point CLAIMLOG_STREAM at another stream) and start again."
        )
    info = await ensure_replicas(nc, info, spec.replicas, what=f"stream {spec.name}", change=create)
    warn_if_not_durable(nc, info, sync=spec.server_sync)
    return await _enable_what_appends_need(nc, info, spec)


def alteration_risks(config: StreamConfig) -> list[str]:
    """Every setting of an existing stream that would let an acknowledged event disappear."""
    problems = []
    if not config.deny_delete:
        problems.append("deny_delete is off (messages can be deleted)")
    if not config.deny_purge:
        problems.append("deny_purge is off (the stream can be purged)")
    if config.allow_rollup_hdrs:
        problems.append("allow_rollup_hdrs is on (a rollup purges earlier messages)")
    if config.retention not in (None, RetentionPolicy.LIMITS):
        problems.append(f"retention is {config.retention.value} (consumed messages are removed)")
    for limit in ("max_msgs", "max_bytes", "max_msgs_per_subject"):
        if (getattr(config, limit) or -1) > 0:
            problems.append(f"{limit} is {getattr(config, limit)} (old events are discarded)")
    if config.max_age:
        problems.append(f"max_age is {config.max_age}s (old events expire)")
    if ALL_EVENTS not in (config.subjects or []):
        problems.append(f"its subjects {config.subjects} do not include {ALL_EVENTS}")
    return problems


async def _enable_what_appends_need(nc: Client, info: StreamInfo, spec: StreamSpec) -> StreamInfo:
    config = info.config
    if config.allow_atomic and config.allow_direct and config.duplicate_window >= spec.duplicate_window:
        return info
    log.warning("enabling atomic batches, direct reads and a %ss duplicate window on %s", spec.duplicate_window, spec.name)
    config.allow_atomic = True
    config.allow_direct = True
    config.duplicate_window = max(config.duplicate_window, spec.duplicate_window)
    return await nc.jetstream().update_stream(config)
