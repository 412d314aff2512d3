"""Whether a stream holds the start of an export, event for event: where a stopped import resumes.

An import that stopped half-way (killed, or refused by the server) leaves the stream holding the file's
first events at their sequences. Run again, it continues after them, but only once each of them has been
read back and found to be the file's: at its sequence, with its bytes, message id, store time and
signature, for its claim and event type. Anything else in the stream (another log, a writer that
appended meanwhile, or a file edited since) is named at its first difference, and nothing is published.
"""

from __future__ import annotations

from collections.abc import Iterator

from services.log import ClaimLog, StoredEvent
from services.log.reader import parse_store_time
from services.log.restore import RestoredEvent

PAGE = 1000


async def first_difference(claim_log: ClaimLog, events: Iterator[tuple[int, RestoredEvent]], *, held: int, path: str) -> str | None:
    """Why the stream's first ``held`` events are not the file's first ``held`` (None when they are)."""
    position = 0
    while position < held:
        page = await claim_log.read_log(after_seq=position, limit=min(PAGE, held - position))
        if not page:
            return f"sequences after {position} cannot be read back"
        for stored in page:
            position += 1
            line = next(events, None)
            if line is None:
                return f"the stream holds {held} events, {path} only {position - 1}"
            why = _differs(claim_log, stored, line[1], position)
            if why:
                return f"sequence {stored.seq} is not the event at {path}:{position} ({why})"
    return None


def _differs(claim_log: ClaimLog, stored: StoredEvent, event: RestoredEvent, position: int) -> str | None:
    if stored.seq != position:
        return f"the stream skips to sequence {stored.seq}"
    if stored.subject != claim_log.layout.stored_subject(event.claim_id, event.event_type):
        return f"it is {stored.subject}, not {event.event_type} of {event.claim_id}"
    if stored.data != event.data:
        return "its bytes differ"
    if stored.msg_id != event.msg_id:
        return f"its message id is {stored.msg_id}, not {event.msg_id}"
    if stored.time_problem is not None:  # refused for its Claimlog-Stored-At: restored with that header as it was
        if stored.restored != event.stored_at:
            return f"its Claimlog-Stored-At is {stored.restored!r}, not {event.stored_at!r}"
    elif stored.stored_at != _time(event.stored_at):
        return f"it was stored at {stored.stored_at.isoformat()}, not {event.stored_at}"
    if (stored.signature or None) != (event.signature or None):
        return "its signature differs"
    return None


def _time(text: str):
    try:
        return parse_store_time(text)
    except ValueError:
        return None
