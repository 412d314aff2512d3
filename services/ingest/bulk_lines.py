"""The lines of a JSON Lines file of commands, read one at a time: each validated on its own, numbered,
and given the event id it is published under; and the report of a run.

A line's event id is its own ``event_id``, or derived from the actor, the line's bytes and how many
identical lines of the same claim came before it (counted in the claim's entry of the ingest's claim
cache, and kept for the run when the claim is evicted), so a re-run derives the same ids and publishes
nothing new, whatever the cache held.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from events import Actor
from services.commands.models import Command, DuplicateKeyError, parse_command
from services.commands.problems import problem_text, where
from services.log.writer import UUID_VARIANT

MAX_LINE = 1_000_000
READ_BUFFER = 1 << 20  # a megabyte a read, not 8 KB: a line's share of the reads is nothing


class Parsed(NamedTuple):
    """One valid command of the file, with its line number and its bytes (stripped)."""

    number: int
    command: Command
    raw: bytes


class Line(NamedTuple):
    """One valid command of the file, with its line number and the event id it will be published under."""

    number: int
    command: Command
    event_id: str


# A named tuple of the values in order, without the Python frame its constructor adds (two a line).
_new = tuple.__new__


class LineError(NamedTuple):
    """A line that was not applied, and why."""

    number: int
    reason: str
    message: str


@dataclass
class BulkReport:
    """What a run did: events accepted, lines already present, lines rejected (with line and reason)."""

    lines: int = 0
    accepted: int = 0
    present: int = 0
    rejected: list[LineError] = field(default_factory=list)
    last_seq: int = 0


def iter_commands(path: Path) -> Iterator[Parsed | LineError]:
    """Each non-blank line of the file, parsed and validated, in order; the file is never held whole."""
    with path.open("rb", buffering=READ_BUFFER) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.strip()
            if not line:
                continue
            try:
                yield _new(Parsed, (number, _parse(raw), line))
            except LineProblem as problem:
                yield LineError(number, problem.reason, f"{path}:{number}: {problem}")


def count_lines(path: Path) -> int:
    """The number of lines of a file, read in blocks (the progress bar's total)."""
    count, last = 0, b"\n"
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def read_commands(path: Path, actor: Actor) -> tuple[list[Line], list[LineError]]:
    """Every line of a (small) file at once, with event ids derived as a run derives them."""
    lines, errors = [], []
    copies: dict[str, Counter[int]] = {}
    for item in iter_commands(path):
        if isinstance(item, LineError):
            errors.append(item)
        else:
            lines.append(with_event_id(item, actor, copies.setdefault(item.command.claim_id, Counter())))
    return lines, errors


class LineProblem(ValueError):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _parse(raw: bytes) -> Command:
    if len(raw) > MAX_LINE:
        raise LineProblem("line_too_long", f"a line holds at most {MAX_LINE} bytes, this one {len(raw)}")
    try:
        return parse_command(raw)
    except DuplicateKeyError as error:
        raise LineProblem("duplicate_key", str(error)) from None
    except ValidationError as error:
        first = error.errors()[0]
        if first["type"] == "json_invalid":
            raise LineProblem("not_json", f"not JSON: {first['msg']}") from None
        problems = "; ".join(f"{where(e, 'line')}: {problem_text(e)}" for e in error.errors()[:5])
        raise LineProblem("invalid_command", problems) from None


def with_event_id(parsed: Parsed, actor: Actor, copies: Counter[int]) -> Line:
    """The line with its event id: its own, or derived: the same id for the n-th copy of the same line
    by the same actor, on every run (a UUID, version 8; ``copies`` counts identical lines of its claim so far).

    Copies are counted under the line's ``hash()``: computed once per bytes object and small, it only
    has to tell lines apart within one run (two different lines of one claim sharing a 64-bit hash, about
    one chance in 10^19 a pair, would count as copies)."""
    if parsed.command.event_id is not None:
        return Line(parsed.number, parsed.command, parsed.command.event_id)
    line = parsed.raw
    copy = copies[key] = copies.get(key := hash(line), 0) + 1  # not ``copies[key] += 1``: Counter's __missing__ is Python
    digest = hashlib.sha256(b"%s\x00%d\x00%s" % (actor.id.encode(), copy, line)).hexdigest()
    event_id = f"{digest[:8]}-{digest[8:12]}-8{digest[13:16]}-{UUID_VARIANT[digest[16]]}{digest[17:20]}-{digest[20:32]}"
    return _new(Line, (parsed.number, parsed.command, event_id))


def report_json(report: BulkReport) -> str:
    """The report as JSON (``claimlog ingest --report``)."""
    return json.dumps(
        {
            "lines": report.lines,
            "accepted": report.accepted,
            "already_present": report.present,
            "rejected": [{"line": e.number, "reason": e.reason, "message": e.message} for e in report.rejected],
            "last_seq": report.last_seq,
        },
        indent=2,
    )
