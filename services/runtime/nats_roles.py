"""Who may do what on claimlog's NATS server: one table of roles, rendered into nats-server configuration.

The embedded server and deploy/nats/users.conf are both rendered from ``role_permissions``; a unit
test keeps the deploy file equal to what this module renders, so the two cannot drift apart.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from events.subjects import DEFAULT_PREFIX, DEFAULT_STREAM, LogLayout
from services.log.names import (
    RATES,
    SLUGS,
    actors_bucket,
    bucket_name,
    bucket_stream,
    key_subject,
    keys_bucket,
    leases_bucket,
    notice_subject,
    object_stream,
    tiles_bucket,
    tlog_bucket,
)
from services.log.servers import inbox_prefix

ROLES = ("admin", "writer", "producer", "projector", "reader")
ACTORS_BUCKET = actors_bucket()  # the default registry's key-value bucket of actors and token hashes (services/identity/actors.py)
USERS_FILE = "nats-users.json"


@dataclass(frozen=True)
class Permissions:
    """Subjects a role may publish to and subscribe to; everything else is denied.

    A role subscribes to its own replies only (``_INBOX.<role>.>``, the prefix ``connect`` gives its
    connections): a reader subscribed to ``_INBOX.>`` would otherwise see the writer's answers, the
    actors' token records among them.
    """

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()  # within ``publish``, what stays closed (the key registry's subject)


def role_permissions(stream: str, prefix: str = DEFAULT_PREFIX) -> dict[str, Permissions | None]:
    """What each role may do on the registry of ``stream`` and subject ``prefix``; ``None`` is everything (admin).

    A writer or a producer publishes events on ``<prefix>.<claim>.<Type>`` only: the stream stores them in
    their partition itself, and nothing else of another registry on the same server is open to it.
    """
    events = LogLayout(prefix).stream_subjects[0]
    # The key registry's changes share the events' subject space (a claim token reserved for them):
    # only admin, who keeps the registry, may publish them.
    registry = (LogLayout(prefix).registry_subject("*"),)
    api = "$JS.API"
    read_log = (*_reads(stream), *_reads(bucket_stream(keys_bucket(stream))))  # the log and the public keys it is signed with
    consume = (
        f"{api}.CONSUMER.CREATE.{stream}",
        f"{api}.CONSUMER.CREATE.{stream}.>",
        f"{api}.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"{api}.CONSUMER.INFO.{stream}.>",
        f"{api}.CONSUMER.DELETE.{stream}.>",
        f"{api}.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
    )
    return {
        "admin": None,  # creates and updates the stream and the actors bucket; operator commands
        # The API processes connect as writer (with commands) or reader: both hear the commit notices.
        # ... and keeps the buckets all API processes share: slugs' owners and the rate limit.
        "writer": _own_replies(user_name("writer", stream), (events, f"{api}.INFO", *read_log, *_reads(bucket_stream(actors_bucket(stream))),
                                          *(s for kind in (SLUGS, RATES) for s in _keeps(bucket_name(kind, stream))),
                                          *_sees_leases(stream), *_reads_tlog(stream)),
                               also=(notice_subject(stream),), deny=registry),
        # A direct producer (a service signing its own events with its own key) publishes events and reads what
        # an append needs: the stream's info and each claim's head (a direct get), and the key registry; not the
        # token store, the shared buckets or the leases. nats.js asks for the account's JetStream info first.
        "producer": _own_replies(user_name("producer", stream), (events, f"{api}.INFO", *read_log), deny=registry),
        # A projector worker also keeps its leases: reads, compare-and-set writes and a key listing.
        # ... and, as the transparency log's integrator (``claimlog tlog integrate``), keeps its tree and tiles.
        "projector": _own_replies(user_name("projector", stream), (*read_log, *consume, notice_subject(stream), *_kv_leases(stream),
                                                                    *_keeps_tlog(stream))),
        "reader": _own_replies(user_name("reader", stream), (*read_log, *_sees_leases(stream), *_reads_tlog(stream)),
                               also=(notice_subject(stream),)),
    }


def user_name(role: str, stream: str = DEFAULT_STREAM) -> str:
    """The NATS user of ``role`` for the registry on ``stream``: the role itself for the default stream,
    ``<role>_<stream>`` for another, so two registries on one server or cluster have users of their own
    (and reply inboxes of their own, ``_INBOX.<user>``)."""
    return role if stream == DEFAULT_STREAM else f"{role}_{stream}"


def _own_replies(user: str, publish: tuple[str, ...], *, also: tuple[str, ...] = (), deny: tuple[str, ...] = ()) -> Permissions:
    return Permissions(publish, subscribe=(f"{inbox_prefix(user)}.>", *also), deny_publish=deny)


def _keeps(bucket: str) -> tuple[str, ...]:
    """Reading and writing the keys of a key-value bucket (not creating or deleting the bucket)."""
    return (key_subject(bucket, ">"), *_reads(bucket_stream(bucket)))


def _kv_leases(stream: str) -> tuple[str, ...]:
    """Keep the partition leases (``services/projector/leases.py``), list the live workers (the
    bucket stream's info) and purge a worker's key as it leaves; admin makes the bucket."""
    bucket = leases_bucket(stream)
    return (*_keeps(bucket), f"$JS.API.STREAM.PURGE.{bucket_stream(bucket)}")


def _sees_leases(stream: str) -> tuple[str, ...]:
    """Read the partition leases and list the live workers, changing nothing: the API's health report
    names each worker and the partitions it holds (``services/read_api/partitions.py``)."""
    return _reads(bucket_stream(leases_bucket(stream)))


def _reads_tlog(stream: str) -> tuple[str, ...]:
    """Read the transparency log (``/log/``): its tree's bucket, and its tiles through the object store's
    gets (an ordered consumer of the object's chunks, with flow control)."""
    objects = object_stream(tiles_bucket(stream))
    api = "$JS.API"
    return (
        *_reads(bucket_stream(tlog_bucket(stream))),
        *_reads(objects),
        f"{api}.CONSUMER.CREATE.{objects}",
        f"{api}.CONSUMER.CREATE.{objects}.>",
        f"{api}.CONSUMER.DELETE.{objects}.>",
        f"$JS.FC.{objects}.>",
    )


def _keeps_tlog(stream: str) -> tuple[str, ...]:
    """Keep the transparency log: its tree, checkpoint, lease and status, and write its tiles."""
    tiles = tiles_bucket(stream)
    return (
        *_keeps(tlog_bucket(stream)),
        *_reads_tlog(stream),
        f"$O.{tiles}.>",
        f"$JS.API.STREAM.PURGE.{object_stream(tiles)}",
    )


def _reads(stream: str) -> tuple[str, ...]:
    """Stream info, plain and direct gets: reading a stream without consuming or changing it."""
    api = "$JS.API"
    return (
        f"{api}.STREAM.INFO.{stream}",
        f"{api}.STREAM.MSG.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}.>",
    )


def authorization_config(stream: str, passwords: Mapping[str, str], *, prefix: str = DEFAULT_PREFIX) -> str:
    """The nats-server ``authorization`` block; ``passwords`` holds each role's config value ("quoted" or $VAR)."""
    users = []
    for role, permissions in role_permissions(stream, prefix).items():
        user = f"    {{user: {user_name(role, stream)}, password: {passwords[role]}"
        if permissions is None:
            users.append(user + "}")
            continue
        users.append(
            f"{user}, permissions: {{\n"
            f"      publish: {{allow: {_subjects(permissions.publish)}{_denied(permissions.deny_publish)}}}\n"
            f"      subscribe: {{allow: {_subjects(permissions.subscribe)}}}\n"
            "    }}"
        )
    return "authorization {\n  users = [\n" + "\n".join(users) + "\n  ]\n}\n"


def _denied(subjects: tuple[str, ...]) -> str:
    return f", deny: {_subjects(subjects)}" if subjects else ""


def _subjects(subjects: tuple[str, ...]) -> str:
    if len(subjects) == 1:
        return f"[{json.dumps(subjects[0])}]"
    return "[\n" + "".join(f"        {json.dumps(s)}\n" for s in subjects) + "      ]"


def password_variable(role: str) -> str:
    """The environment variable that holds a role's password in deploy/."""
    return f"NATS_{role.upper()}_PASSWORD"


def read_passwords(data_dir: Path) -> dict[str, str]:
    """The roles' passwords kept in the data directory (empty when there are none yet)."""
    try:
        return json.loads((data_dir / USERS_FILE).read_text())
    except FileNotFoundError:
        return {}


def role_passwords(data_dir: Path) -> dict[str, str]:
    """Each role's password for this data directory: generated once, then kept (mode 0600) across restarts."""
    path = data_dir / USERS_FILE
    stored = read_passwords(data_dir)
    if stored.keys() >= set(ROLES):
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        return stored
    passwords = {role: secrets.token_urlsafe(32) for role in ROLES} | stored
    _write_private(path, passwords, replace=bool(stored))
    return read_passwords(data_dir)


def _write_private(path: Path, passwords: dict[str, str], *, replace: bool) -> None:
    """Write the file readable by its owner only; a new file is linked in, so a racing creator's wins intact."""
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(passwords, out, indent=2)
    try:
        if replace:
            os.replace(staged, path)
        else:
            os.link(staged, path)
    except FileExistsError:
        pass  # another process created it first: everyone uses its passwords
    finally:
        staged.unlink(missing_ok=True)


def with_credentials(url: str, user: str, password: str) -> str:
    """``nats://host:port`` as ``nats://user:password@host:port`` (passwords here are URL-safe)."""
    scheme, _, address = url.partition("://")
    return f"{scheme}://{user}:{password}@{address}"
