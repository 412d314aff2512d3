"""Create the claim stream, or verify an existing one is a log that cannot be altered."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig, StreamInfo, SubjectTransform
from nats.js.errors import NotFoundError

from events.log_entry import MAX_MESSAGE_BYTES
from events.subjects import DEFAULT_LAYOUT, LogLayout, read_transform
from services.log.durability import warn_if_not_durable
from services.log.errors import LogConfigError
from services.log.replication import ensure_replicas, placed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamSpec:
    """What claimlog needs of its stream."""

    name: str
    replicas: int = 1
    duplicate_window: float = 300.0
    # The server's JetStream sync_interval when claimlog configured the server itself (embedded), else None.
    server_sync: str | None = None
    # The subject prefix and the number of partitions, fixed when the stream is made.
    layout: LogLayout = DEFAULT_LAYOUT

    def config(self) -> StreamConfig:
        """The stream configuration claimlog creates."""
        transform = self.layout.transform
        return StreamConfig(
            name=self.name,
            description="claimlog: the immutable log of research-claim events",
            subjects=self.layout.stream_subjects,
            subject_transform=SubjectTransform(src=transform[0], dest=transform[1]) if transform else None,
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=self.replicas,
            max_msgs=-1,
            max_bytes=-1,
            max_msg_size=MAX_MESSAGE_BYTES,  # every message fits one transparency-log entry (events/log_entry.py)
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
        info = await placed(lambda: js.add_stream(spec.config()), what=f"stream {spec.name}", wanted=spec.replicas)
        warn_if_not_durable(nc, info, sync=spec.server_sync)
        return await until_led(js, info)
    refuse_unfit(info.config, spec)
    info = await ensure_replicas(nc, info, spec.replicas, what=f"stream {spec.name}", change=create)
    warn_if_not_durable(nc, info, sync=spec.server_sync)
    return await _enable_what_appends_need(nc, info, spec)


async def until_led(js: JetStreamContext, info: StreamInfo, *, timeout: float = 10.0) -> StreamInfo:
    """A replicated stream just made has no leader for a moment, and an append then answers 503: wait
    for its first leader (for ``timeout`` at most, then the appends' own message says it is electing one)."""
    deadline = time.monotonic() + timeout
    while info.cluster is not None and not info.cluster.leader and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        info = await js.stream_info(info.config.name)
    return info


async def check_existing(nc: Client, spec: StreamSpec) -> None:
    """Refuse, changing nothing, an existing stream that ``ensure_stream`` would refuse; a missing one passes (it is made)."""
    try:
        info = await nc.jetstream().stream_info(spec.name)
    except NotFoundError:
        return
    refuse_unfit(info.config, spec)


def refuse_unfit(config: StreamConfig, spec: StreamSpec) -> None:
    """Refuse a stream that can lose or rewrite events, or stores them in other partitions than configured."""
    problems = alteration_risks(config, spec.layout)
    if problems:
        raise LogConfigError(
            f"stream {spec.name} can lose or rewrite events: {'; '.join(problems)}. "
            "claimlog refuses to run on it: the log is its only source of truth. "
            "Fix the stream's configuration (or point CLAIMLOG_STREAM at another stream) and start again."
        )
    check_layout(config, spec.layout)


def stored_partitions(config: StreamConfig, prefix: str) -> int:
    """The number of partitions an existing stream stores ``prefix``'s events in (0: unpartitioned)."""
    transform = config.subject_transform
    try:
        return read_transform(prefix, transform and transform.src, transform and transform.dest)
    except ValueError as error:
        raise LogConfigError(f"stream {config.name}: {error}") from None


def check_layout(config: StreamConfig, layout: LogLayout) -> None:
    """Refuse a stream whose partitions are not the configured ones: they are fixed when the stream is made."""
    found = stored_partitions(config, layout.prefix)
    if found == layout.partitions:
        return
    held = f"in {found} partitions" if found else "unpartitioned (as published)"
    raise LogConfigError(
        f"stream {config.name} stores its events {held}, but CLAIMLOG_PARTITIONS is {layout.partitions}. "
        f"The partitions of a stream are fixed when it is made: set CLAIMLOG_PARTITIONS={found} to use it "
        "as it is, or copy the log into a new stream (export, import, verify: docs/operations.md)."
    )


def alteration_risks(config: StreamConfig, layout: LogLayout = DEFAULT_LAYOUT) -> list[str]:
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
    wanted = layout.stream_subjects[0] if stored_partitions(config, layout.prefix) else layout.all_events
    if wanted not in (config.subjects or []):
        problems.append(f"its subjects {config.subjects} do not include {wanted}")
    return problems


async def _enable_what_appends_need(nc: Client, info: StreamInfo, spec: StreamSpec) -> StreamInfo:
    config = info.config
    bounded = config.max_msg_size is not None and 0 < config.max_msg_size <= MAX_MESSAGE_BYTES
    if config.allow_atomic and config.allow_direct and config.duplicate_window >= spec.duplicate_window and bounded:
        return info
    log.warning(
        "enabling atomic batches, direct reads, a %ss duplicate window and messages of at most %d bytes on %s",
        spec.duplicate_window, MAX_MESSAGE_BYTES, spec.name,
    )
    if not bounded:
        config.max_msg_size = MAX_MESSAGE_BYTES
    config.allow_atomic = True
    config.allow_direct = True
    config.duplicate_window = max(config.duplicate_window, spec.duplicate_window)
    return await nc.jetstream().update_stream(config)
