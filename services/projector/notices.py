"""What a projector tells the API processes after each commit: which claims it changed, and through which
log sequence.

A notice goes on a NATS core subject outside the log's (``claimlog.live.<stream>``), after the read-model
transaction commits, so a read with ``?after=`` a notice's sequence shows it. Whichever worker committed
sends it, and every API process subscribed hears it. Notices are fire-and-forget: a lost one delays a
live page until the next change or reconnection (which catches up from the read models); it never
changes what is served.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from projections.base import Record


@dataclass(frozen=True)
class Notice:
    """Claims changed by one commit (claim id -> its last sequence in it), and the commit's last sequence."""

    claims: dict[str, int]
    through: int


def encode_notice(records: Iterable[Record], through: int) -> bytes:
    """The notice of a committed batch of records."""
    claims = {record.event.claim_id: record.seq for record in records}
    return json.dumps({"claims": claims, "through": through}, separators=(",", ":")).encode()


def decode_notice(data: bytes) -> Notice | None:
    """A notice, or None for bytes that are not one (they are ignored: notices only ever hint)."""
    try:
        body = json.loads(data)
        claims = {str(claim): int(seq) for claim, seq in body["claims"].items()}
        return Notice(claims, int(body["through"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
