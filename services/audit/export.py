"""``claimlog export`` and ``claimlog import``: the log, or one claim's history, as JSON Lines.

One object per stored event, refused ones (services/admission/) included: ``seq``, ``subject``,
``stored_at``, ``hash`` (SHA-256 of the stored bytes), ``msg_id`` (and ``stored_at_header``, the
``Claimlog-Stored-At`` header of an event refused for it, restored as it was) and the event exactly as stored: ``event`` holds the stored bytes as a string when
they are UTF-8 (almost always), ``event_b64`` holds them base64-encoded otherwise; ``signature``, when
the event is signed, holds its signature headers. An import checks the whole file first and
republishes those exact bytes and headers, so the restored log hashes and verifies the same. An import
that stopped half-way continues after what the stream holds, once that is found to be the file's start
(services/audit/resume.py).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from events.subjects import exported_subject
from services.audit.resume import first_difference
from services.log import ClaimLog, StoredEvent
from services.log.reader import parse_store_time
from services.log.restore import Republisher, RestoredEvent
from services.log.signing import PROOF, SIGNATURE, SIGNER

SIGNATURE_HEADERS = {SIGNER, SIGNATURE, PROOF}
_HEADER_VALUE = re.compile(r"[A-Za-z0-9._/;,=-]{1,4096}")

PAGE = 1000
Progress = Callable[[int], None]


class ExportFileError(ValueError):
    """A line of an export file that cannot be imported: says which line and why."""


class ImportRefused(RuntimeError):
    """The import was not started: says why (nothing was published)."""


@dataclass(frozen=True)
class Imported:
    """What an import restored: ``events`` at ``first_seq`` to ``last_seq``, after the ``held`` already there."""

    events: int
    first_seq: int
    last_seq: int
    renumbered: bool  # the file's sequences were not 1..n (a claim's export), so the restored ones differ
    held: int = 0  # the file's first events the stream held already, from an import that stopped half-way


def export_line(stored: StoredEvent) -> str:
    """One stored event as a line of JSON (without the newline)."""
    line = {
        "seq": stored.seq,
        "subject": stored.subject,
        "stored_at": stored.stored_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "hash": hashlib.sha256(stored.data).hexdigest(),
        "msg_id": stored.msg_id,
    }
    if stored.signature:
        line["signature"] = stored.signature
    if stored.time_problem is not None and stored.restored is not None:
        # Refused for its Claimlog-Stored-At (services/admission/): kept, with the header as it was, so an
        # import stores it as it is here and every reader refuses it there too.
        line["stored_at_header"] = stored.restored
    try:
        line["event"] = stored.data.decode()
    except UnicodeDecodeError:
        line["event_b64"] = base64.b64encode(stored.data).decode()
    return json.dumps(line, ensure_ascii=False)


async def export_log(
    claim_log: ClaimLog, out: TextIO, *, claim_id: str | None = None, progress: Progress | None = None,
    up_to_seq: int | None = None,
) -> int:
    """Write every stored event (or one claim's) up to ``up_to_seq`` (else the current head), in log order;
    returns how many."""
    head = await claim_log.head() if up_to_seq is None else up_to_seq
    written = 0
    async for page in _pages(claim_log, head, claim_id):
        for stored in page:
            out.write(export_line(stored) + "\n")
        written += len(page)
        if progress is not None:
            progress(page[-1].seq)
    return written


async def _pages(claim_log: ClaimLog, head: int, claim_id: str | None):
    if claim_id is not None:
        events = await claim_log.read_claim(claim_id, up_to_seq=head)
        for start in range(0, len(events), PAGE):
            yield events[start : start + PAGE]
        return
    after = 0
    while after < head:
        page = [stored for stored in await claim_log.read_log(after_seq=after, limit=PAGE) if stored.seq <= head]
        if not page:
            return
        yield page
        after = page[-1].seq


def read_export(path: Path) -> Iterator[tuple[int, RestoredEvent]]:
    """The file's events in order, with their exported sequences; raises ``ExportFileError`` naming the line of the first bad one."""
    previous_seq = 0
    with path.open(encoding="utf-8") as lines:
        for number, text in enumerate(lines, start=1):
            try:
                seq, event = _parse(text)
            except (ValueError, TypeError, KeyError) as error:
                raise ExportFileError(f"{path}:{number}: {_reason(error)}") from None
            if seq <= previous_seq:
                raise ExportFileError(f"{path}:{number}: sequence {seq} does not come after {previous_seq}: lines out of order")
            previous_seq = seq
            yield seq, event


def _reason(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"field {error.args[0]!r} is missing"
    return str(error)


def _parse(text: str) -> tuple[int, RestoredEvent]:
    try:
        line = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON ({error})") from None
    if not isinstance(line, dict):
        raise ValueError("a line is a JSON object")
    seq, subject, stored_at, digest = line["seq"], line["subject"], line["stored_at"], line["hash"]
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError(f"seq must be a positive integer, got {seq!r}")
    claim_id, event_type = exported_subject(subject)
    parse_store_time(stored_at)
    data = _stored_bytes(line)
    if hashlib.sha256(data).hexdigest() != digest:
        raise ValueError(f"hash {digest!r} is not the SHA-256 of the event's bytes: the event was altered")
    return seq, RestoredEvent(claim_id, event_type, data, _msg_id(line), _header_time(line) or stored_at, _signature(line))


def _header_time(line: dict) -> str | None:
    """The Claimlog-Stored-At header of an event refused for it, as exported (restored as it was), or None."""
    header = line.get("stored_at_header")
    if header is not None and (not isinstance(header, str) or not header or len(header) > 4096 or any(c in header for c in "\r\n\0")):
        raise ValueError(f"stored_at_header must be null or a one-line string, got {header!r:.80}")
    return header


def _msg_id(line: dict) -> str | None:
    """The event's message id as exported: an event stored without one is restored without one, as it was."""
    msg_id = line.get("msg_id")
    if msg_id is not None and (not isinstance(msg_id, str) or not msg_id or "\r" in msg_id or "\n" in msg_id):
        raise ValueError(f"msg_id must be null or a one-line string, got {msg_id!r}")
    return msg_id


def _signature(line: dict) -> dict[str, str] | None:
    """The event's signature headers as exported (checked by whoever reads the log, not here), or None."""
    signature = line.get("signature")
    if signature is None:
        return None
    if not isinstance(signature, dict) or not signature or not set(signature) <= SIGNATURE_HEADERS or not all(
        isinstance(value, str) and _HEADER_VALUE.fullmatch(value) for value in signature.values()
    ):
        raise ValueError(f"signature must map {sorted(SIGNATURE_HEADERS)} to header values (letters, digits and . _ - / ; , =)")
    return signature


def _stored_bytes(line: dict) -> bytes:
    if isinstance(line.get("event"), str):
        return line["event"].encode()
    if isinstance(line.get("event_b64"), str):
        return base64.b64decode(line["event_b64"], validate=True)
    raise ValueError("the event is missing: neither 'event' (a string) nor 'event_b64'")


async def resumable(claim_log: ClaimLog, path: Path, *, count: int) -> int:
    """How many of the file's ``count`` events the stream already holds, from an import that stopped (0: empty);
    a stream that holds anything else, or the whole file, is refused."""
    held = await claim_log.head()
    if not held:
        return 0
    why = await first_difference(claim_log, read_export(path), held=held, path=str(path))
    if why is not None:
        raise ImportRefused(
            f"stream {claim_log.stream} is not empty and does not begin with {path}: {why}. An import goes into an "
            "empty stream, or continues one that stopped half-way, so that sequences and hash chains come back as they were"
        )
    if held == count:
        raise ImportRefused(f"stream {claim_log.stream} is not empty: it already holds all {count} events of {path}, "
                            "at their sequences, byte for byte; there is nothing left to import")
    return held


async def import_file(
    claim_log: ClaimLog, path: Path, *, window: int = 256, progress: Progress | None = None, held: int | None = None
) -> Imported:
    """Check the whole file, then republish its events byte for byte into the stream, after those it already
    holds (``held``, when the caller has checked them with ``resumable``)."""
    count, renumbered = 0, False
    for position, (seq, _) in enumerate(read_export(path), start=1):
        count, renumbered = position, renumbered or seq != position
    if not count:
        raise ImportRefused(f"{path} holds no events")
    if held is None:
        held = await resumable(claim_log, path, count=count)
    restored = held
    async with Republisher(claim_log.nc, claim_log.stream, after_seq=held, window=window, layout=claim_log.layout) as republisher:
        for _, event in itertools.islice(read_export(path), held, None):
            restored = await republisher.publish(event)
            if progress is not None and restored % 100 == 0:
                progress(restored)
    if progress is not None:
        progress(restored)
    return Imported(count - held, held + 1, restored, renumbered, held)
