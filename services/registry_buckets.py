"""The key-value buckets claimlog keeps beside a registry's log, each with what it holds: what ``claimlog
status`` and ``GET /health`` report on, beside the log itself, since a bucket whose copies are lost or
leaderless stops writes as surely as the log (tokens, slugs, the shared rate limit) or the projector
workers (their leases)."""

from __future__ import annotations

from events.subjects import DEFAULT_STREAM
from services.log.buckets import KINDS
from services.log.names import bucket_name, bucket_stream


def registry_buckets(stream: str = DEFAULT_STREAM) -> dict[str, str]:
    """The streams of the registry's buckets (``KV_<bucket>``), each with what the bucket holds, in words."""
    return {bucket_stream(bucket_name(kind, stream)): kind_.what for kind, kind_ in KINDS.items()}
