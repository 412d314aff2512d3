"""A key-value bucket as the stream it is: its stream's name, and its keys listed in one request.

nats-py lists a bucket's keys through ``KeyValue.keys()``, a watcher made for each look: on a busy
machine it can signal its end before its entries arrive (a revocation then found no token), and making
and removing it at every look costs a projector worker's event loop enough to show in latency. The
bucket's stream answers the same question in one request: ``stream_info`` with a subjects filter names
every subject that still holds a value (a key deleted with purge, or aged out by the bucket's ttl, is
gone from it).
"""

from __future__ import annotations

from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from services.log.names import bucket_stream, key_subject


async def bucket_keys(js: JetStreamContext, bucket: str, prefix: str = "") -> list[str]:
    """The keys of ``bucket`` that start with ``prefix`` and hold a value, sorted; none if the bucket
    does not exist. ``prefix`` ends at a token boundary (``"token."``) or is empty for every key."""
    subjects = key_subject(bucket, "")
    try:
        info = await js.stream_info(bucket_stream(bucket), subjects_filter=key_subject(bucket, f"{prefix}>"))
    except NotFoundError:
        return []
    return sorted(subject.removeprefix(subjects) for subject in info.state.subjects or {})
