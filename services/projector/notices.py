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
import re
from collections.abc import Iterable
from dataclasses import dataclass

from events.envelope import CLAIM_ID_PATTERN
from projections.base import Record

MAX_SEQ = 2**53 - 1  # a sequence a browser's JSON reads exactly
MAX_CLAIMS = 10_000  # a commit's claims: at most a batch's events (CLAIMLOG_PROJECTOR_BATCH is at most 10,000)
MAX_NOTICE_BYTES = 1_048_576  # NATS's default largest message
CLAIM_ID = re.compile(CLAIM_ID_PATTERN.removeprefix("^").removesuffix("$"))


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
    """A notice, or None for bytes that are not one (they are ignored: notices only ever hint).

    Anyone holding the projector credential can send one, and browsers read its numbers: a notice is
    read only when it is what a projector sends: at most ``MAX_CLAIMS`` claim ids, each with a sequence
    from 1 to ``MAX_SEQ`` (JavaScript's largest exact integer) at or below ``through``."""
    if len(data) > MAX_NOTICE_BYTES:
        return None
    try:
        body = json.loads(data)
        claims, through = body["claims"], body["through"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(claims, dict) or len(claims) > MAX_CLAIMS or not _seq(through):
        return None
    for claim, seq in claims.items():
        if not CLAIM_ID.fullmatch(claim) or not _seq(seq) or seq > through:
            return None
    return Notice(claims, through)


def _seq(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_SEQ
