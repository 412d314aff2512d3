"""The per-claim hash chain: each event records the SHA-256 of the stored bytes of the claim's previous event."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from events import Event, encode


def event_hash(data: bytes) -> str:
    """The hash the next event of the claim records as its ``prev_hash``."""
    return hashlib.sha256(data).hexdigest()


def chain(events: Sequence[Event], prev_hash: str | None) -> list[tuple[Event, bytes]]:
    """Link each event to the previous one of its claim and encode it, in order."""
    linked = []
    for event in events:
        if event.prev_hash != prev_hash:
            event = event.model_copy(update={"prev_hash": prev_hash})
        data = encode(event)
        linked.append((event, data))
        prev_hash = event_hash(data)
    return linked
