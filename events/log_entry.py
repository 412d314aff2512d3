"""An entry of the transparency log: the canonical encoding of one stored message (version 1).

Every message the claim stream stores is one entry, at index ``sequence - 1``. An entry holds what an
auditor needs to replay and re-check the event, and nothing that depends on how this registry stores
it (the stored subject carries a partition that the layout chooses, so it is left out):

    claimlog/entry/v1
    claim <claim id>
    type <event type>
    stored <store time: UTC, microseconds, 2026-12-07T11:21:02.123456Z>
    header <name>: <value>          one line per allow-listed header the message has, in HEADERS order
    body-sha256 <hex>               only for a message stored before the size bound whose entry would not fit
    <empty line>
    <the stored body bytes, exactly>

The store time is the one readers fold with: the ``Claimlog-Stored-At`` header an import sets, else
the server's, truncated to microseconds; so a restore reproduces every entry exactly and an honest
restore yields the same tree. Only the headers in ``HEADERS`` enter: the signature, its key and its
proof (docs/events.md#signatures) and the message id; values are kept as the server returns them.

An entry fits a C2SP entry bundle (a big-endian uint16 length: at most ``MAX_ENTRY_BYTES``): the event
contract bounds an event's stored bytes (``MAX_EVENT_BYTES``) and the stream bounds a whole message,
headers included (``MAX_MESSAGE_BYTES``, its ``max_msg_size``), so a new entry always fits; an older
message whose entry would not is entered with its body's SHA-256 in place of the body.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

VERSION_LINE = b"claimlog/entry/v1"
MAX_ENTRY_BYTES = 65_535  # a C2SP entry bundle's uint16 length prefix
MAX_SUBJECT_BYTES = 4_096  # claim and type come from the stored subject, which NATS bounds
MAX_MESSAGE_BYTES = 60_000  # the stream's max_msg_size: body and headers; with a subject and the lines, under 65,535
MAX_EVENT_BYTES = 56_000  # an event's encoded bytes, leaving room for its signature and NATS headers
SIGNER, SIGNATURE, PROOF, MSG_ID = "Claimlog-Signer", "Claimlog-Signature", "Claimlog-Proof", "Nats-Msg-Id"
HEADERS = (SIGNER, SIGNATURE, PROOF, MSG_ID)  # the meaningful headers, in the order an entry lists them
# Set only by ``claimlog import`` (services/log/restore.py): the store time the event had in the exported
# log. It stands for the server's time, so a restored log folds into the same read models; readers read it first.
RESTORED_TIME = "Claimlog-Stored-At"

_TOKEN = re.compile(r"[^\s.*>]+")


class EntryError(ValueError):
    """Bytes that are not a version-1 entry, or a message that cannot be one (what and why in the message)."""


@dataclass(frozen=True)
class LogEntry:
    """One entry: the claim and type from the stored subject, the store time, the allow-listed headers, the body."""

    claim_id: str
    event_type: str
    stored_at: datetime
    headers: tuple[tuple[str, str], ...]
    body: bytes
    body_sha256: str | None = None  # set instead of ``body`` for an old message too large for a bundle


def store_time_text(stored_at: datetime) -> str:
    """The canonical store time: UTC, six fractional digits, ``Z``."""
    if stored_at.tzinfo is None:
        raise EntryError("an entry's store time needs a time zone")
    if stored_at.tzinfo is not UTC:
        stored_at = stored_at.astimezone(UTC)
    return stored_at.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"  # strftime costs twice as much


def from_message(subject: str, stored_at: datetime, headers: Mapping[str, str] | None, body: bytes) -> LogEntry:
    """The entry of a stored message: its subject's last two tokens are the claim and the type."""
    tokens = subject.split(".")
    if len(tokens) < 3:
        raise EntryError(f"stored subject {subject!r} does not end in <claim>.<type>")
    kept = tuple((name, headers[name].strip()) for name in HEADERS if headers and headers.get(name) is not None)
    return LogEntry(tokens[-2], tokens[-1], stored_at, kept, body)


def encode_entry(entry: LogEntry) -> bytes:
    """The entry's canonical bytes; a body that would not fit a bundle is replaced by its SHA-256."""
    head = _head(entry, entry.body_sha256)
    if len(head) + len(entry.body) <= MAX_ENTRY_BYTES:
        return head + entry.body
    return _head(entry, hashlib.sha256(entry.body).hexdigest())


def _head(entry: LogEntry, digest: str | None) -> bytes:
    _token(entry.claim_id, "claim")
    _token(entry.event_type, "type")
    text = f"claimlog/entry/v1\nclaim {entry.claim_id}\ntype {entry.event_type}\nstored {store_time_text(entry.stored_at)}\n"
    for name, value in entry.headers:
        if name not in HEADERS or "\n" in value or "\r" in value:
            raise EntryError(f"header {name!r} is not one an entry holds, or its value spans lines")
        text += f"header {name}: {value}\n"
    if digest is not None:
        text += f"body-sha256 {digest}\n"
    return (text + "\n").encode()


def _token(value: str, what: str) -> None:
    if not _TOKEN.fullmatch(value) or (len(value) * 4 > MAX_SUBJECT_BYTES and len(value.encode()) > MAX_SUBJECT_BYTES):
        raise EntryError(f"an entry's {what} {value[:80]!r} is not one subject token")


def decode_entry(data: bytes) -> LogEntry:
    """An entry from its bytes, or EntryError naming the line that breaks it."""
    head, sep, body = data.partition(b"\n\n")
    if not sep:
        raise EntryError("an entry needs an empty line between its lines and its body")
    lines = head.split(b"\n")
    if lines[0] != VERSION_LINE:
        raise EntryError(f"an entry starts with {VERSION_LINE.decode()!r}, not {lines[0][:40]!r}")
    if len(lines) < 4 or not all(line.startswith(p) for line, p in zip(lines[1:4], (b"claim ", b"type ", b"stored "), strict=True)):
        raise EntryError("an entry's lines 2 to 4 are 'claim <id>', 'type <type>', 'stored <time>'")
    try:
        stored_at = datetime.strptime(lines[3][7:].decode(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        rest = [line.decode() for line in lines[4:]]
    except (ValueError, UnicodeDecodeError) as error:
        raise EntryError(f"an entry's store time or header lines do not parse: {error}") from None
    headers, digest = [], None
    for n, line in enumerate(rest, start=5):
        if line.startswith("header ") and ": " in line:
            headers.append(tuple(line[7:].split(": ", 1)))
        elif line.startswith("body-sha256 ") and n == len(lines) and re.fullmatch(r"[0-9a-f]{64}", line[12:]):
            digest = line[12:]
        else:
            raise EntryError(f"entry line {n} is neither 'header <name>: <value>' nor a final 'body-sha256 <hex>'")
    order = [HEADERS.index(name) if name in HEADERS else -1 for name, _ in headers]
    if -1 in order or order != sorted(set(order)):
        raise EntryError(f"an entry's headers are some of {', '.join(HEADERS)}, once each, in that order")
    entry = LogEntry(lines[1][6:].decode(), lines[2][5:].decode(), stored_at, tuple(headers), body, digest)
    if digest is not None and body:
        raise EntryError("an entry with body-sha256 holds no body")
    if encode_entry(entry) != data:
        raise EntryError("the entry is not in its canonical form (header order, names or time digits)")
    return entry


PREDECESSOR_LINE = b"claimlog/predecessor/v1"


@dataclass(frozen=True)
class Predecessor:
    """Entry 0 of a log that succeeds another (a new log identity: new origin and key): the previous log's
    verifier key and the last checkpoint it signed, as a signed note. Every later entry ``i`` is then the
    message at stream sequence ``i``: the new tree commits to the whole stream, after the statement of
    which tree it follows.

        claimlog/predecessor/v1
        vkey <the previous log's verifier key>
        <empty line>
        <the previous log's last signed checkpoint, a signed note, with any cosignatures>
    """

    vkey: str
    checkpoint: str  # the signed note, exactly as that log (and its witnesses) signed it


def encode_predecessor(predecessor: Predecessor) -> bytes:
    """The entry's canonical bytes."""
    if not predecessor.vkey or any(c.isspace() for c in predecessor.vkey):
        raise EntryError(f"a predecessor's verifier key {predecessor.vkey[:80]!r} is empty or holds spaces")
    if not predecessor.checkpoint.endswith("\n"):
        raise EntryError("a predecessor's checkpoint is a signed note, which ends in a newline")
    data = PREDECESSOR_LINE + b"\nvkey " + predecessor.vkey.encode() + b"\n\n" + predecessor.checkpoint.encode()
    if len(data) > MAX_ENTRY_BYTES:
        raise EntryError(f"a predecessor entry of {len(data)} bytes does not fit an entry bundle ({MAX_ENTRY_BYTES})")
    return data


def decode_predecessor(data: bytes) -> Predecessor | None:
    """The predecessor an entry states, or None when the entry is not a predecessor entry."""
    if not data.startswith(PREDECESSOR_LINE + b"\n"):
        return None
    head, sep, note = data.partition(b"\n\n")
    lines = head.split(b"\n")
    if not sep or len(lines) != 2 or not lines[1].startswith(b"vkey "):
        raise EntryError("a predecessor entry is its version line, 'vkey <verifier key>', an empty line and a signed note")
    try:
        predecessor = Predecessor(lines[1][5:].decode(), note.decode())
    except UnicodeDecodeError as error:
        raise EntryError(f"a predecessor entry is not UTF-8: {error}") from None
    if encode_predecessor(predecessor) != data:
        raise EntryError("the predecessor entry is not in its canonical form")
    return predecessor
