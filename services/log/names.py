"""Every name claimlog gives a thing on NATS beside the log's own subjects: the key-value buckets of a
registry, the streams and subjects they are kept under, and the subject of the projector's commit notices.

The log's subjects (``claims.<p>.<claim_id>.<EventType>``) are the published contract and live in
``events/subjects.py``. Everything else is named here, once, so the roles' permissions
(``services/runtime/nats_roles.py``), the start-up that makes the buckets (``services/runtime/from_settings.py``),
backups and health read the same names as the code that uses them. A registry on another stream than
the default gets buckets of its own (``<bucket>_<stream>``): registries sharing a server never meet.
"""

from __future__ import annotations

from events.subjects import DEFAULT_STREAM

ACTORS = "claimlog_actors"  # actors and the hashes of their bearer tokens (services/identity/actors.py)
KEYS = "claimlog_keys"  # the signing keys (services/identity/keys.py)
SLUGS = "claimlog_slugs"  # the claim each slug belongs to (services/commands/slugs.py)
RATES = "claimlog_rates"  # each actor's writes left (services/identity/rate_limit.py)
LEASES = "claimlog-leases"  # projector workers and their partitions (services/projector/leases.py)
TLOG = "claimlog_tlog"  # the transparency log's tree record, signed checkpoint, lease and status (services/tlog/)
TILES = "claimlog_tiles"  # the transparency log's hash tiles and entry bundles (an object store, services/tlog/)
KV_PREFIX = "KV_"  # a key-value bucket's stream is its name after this prefix
OBJ_PREFIX = "OBJ_"  # an object store's stream is its name after this prefix


def bucket_name(kind: str, stream: str = DEFAULT_STREAM) -> str:
    """The bucket of ``kind`` (one of the names above) of the registry on ``stream``."""
    return kind if stream == DEFAULT_STREAM else f"{kind}_{stream}"


def actors_bucket(stream: str = DEFAULT_STREAM) -> str:
    """The key-value bucket of the actors of the registry on ``stream``: registries sharing a server never share tokens."""
    return bucket_name(ACTORS, stream)


def keys_bucket(stream: str = DEFAULT_STREAM) -> str:
    """The key-value bucket of the signing keys of the registry on ``stream``."""
    return bucket_name(KEYS, stream)


def leases_bucket(stream: str = DEFAULT_STREAM) -> str:
    """The leases bucket of the registry on ``stream``: workers of registries sharing a server never meet."""
    return bucket_name(LEASES, stream)


def tlog_bucket(stream: str = DEFAULT_STREAM) -> str:
    """The key-value bucket of the transparency log over ``stream``: its tree, checkpoint, lease and status."""
    return bucket_name(TLOG, stream)


def tiles_bucket(stream: str = DEFAULT_STREAM) -> str:
    """The object store of the transparency log over ``stream``: its tiles and entry bundles."""
    return bucket_name(TILES, stream)


def object_stream(bucket: str) -> str:
    """The stream an object store keeps its objects in."""
    return f"{OBJ_PREFIX}{bucket}"


def bucket_stream(bucket: str) -> str:
    """The stream a key-value bucket keeps its entries in."""
    return f"{KV_PREFIX}{bucket}"


def key_subject(bucket: str, key: str) -> str:
    """The subject a key's values are stored under in the bucket's stream (``>`` for every key)."""
    return f"$KV.{bucket}.{key}"


def notice_subject(stream: str) -> str:
    """The subject of a stream's commit notices (``services/projector/notices.py``): outside every subject
    the stream stores, so a notice is not an event and costs the log nothing."""
    return f"claimlog.live.{stream}"
