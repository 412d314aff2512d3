"""Bulk ingestion of commands from JSON Lines: validated first, then decided and appended with many acks in flight.

Each line is one command (the JSON ``POST /commands`` takes). Lines of one claim apply in file order,
each decided against the state the previous ones left; claims go in parallel, a bounded number at a
time, so the log holds a window of appends unacknowledged instead of one round trip per event.

Re-running a file publishes nothing new: a line's event id is its own ``event_id``, or derived from
the actor, the command's content and how many identical lines came before it; a line whose event is
already in the claim's history counts as already present.

A reference to another claim (``superseded_by``, ``related_claim_id``) holds when that claim was in
the log before the run, or is drafted by an earlier line of the file (never by a later one, however
the parallel claims happen to interleave).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from events import Actor
from events.envelope import utc_now
from services.commands.decide import Context, Rejected, decide, referenced_claims
from services.commands.models import Command, DuplicateKeyError, parse_command
from services.commands.service import already_done
from services.commands.state import ClaimState, claim_state
from services.log import ClaimLog, ConflictError, LogError, Pipeline

MAX_LINE = 1_000_000
CONFLICT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class Line:
    """One valid command of the file, with its line number and the event id it will be published under."""

    number: int
    command: Command
    event_id: str


@dataclass(frozen=True, slots=True)
class LineError:
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


def read_commands(path: Path, actor: Actor) -> tuple[list[Line], list[LineError]]:
    """Parse and validate every line first: nothing is published from a line that does not validate."""
    lines, errors = [], []
    seen: Counter[bytes] = Counter()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                command = _parse(raw)
            except LineProblem as problem:
                errors.append(LineError(number, problem.reason, f"{path}:{number}: {problem}"))
                continue
            lines.append(Line(number, command, command.event_id or _derived_id(actor, raw, seen)))
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
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']}" for e in error.errors()[:5])
        raise LineProblem("invalid_command", problems) from None


def _derived_id(actor: Actor, raw: bytes, seen: Counter[bytes]) -> str:
    """The same id for the n-th copy of the same line by the same actor, on every run (a UUID, version 8)."""
    line = raw.strip()
    seen[line] += 1
    digest = hashlib.sha256(b"%s\x00%d\x00%s" % (actor.id.encode(), seen[line], line)).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-8{digest[13:16]}-{'89ab'[int(digest[16], 16) % 4]}{digest[17:20]}-{digest[20:32]}"


class BulkIngest:
    """Decide and append a file's commands, ``window`` claims at a time."""

    def __init__(
        self, log: ClaimLog, actor: Actor, *, window: int = 512, clock: Callable[[], datetime] = utc_now,
        on_line: Callable[[int], None] = lambda n: None,
    ) -> None:
        self._log, self._actor, self._window, self._clock, self._on_line = log, actor, window, clock, on_line
        self._known: dict[str, bool] = {}
        self._drafted_at: dict[str, int] = {}
        self._start_head = 0
        self.report = BulkReport()

    async def run(self, lines: list[Line]) -> BulkReport:
        """Apply ``lines``; returns the report (rejections sorted by line)."""
        by_claim: dict[str, list[Line]] = defaultdict(list)
        for line in lines:
            by_claim[line.command.claim_id].append(line)
            if line.command.command == "draft_claim":
                self._drafted_at.setdefault(line.command.claim_id, line.number)
        self.report.lines += len(lines)
        self._start_head = await self._log.head()
        queue = iter(by_claim.items())
        async with self._log.pipeline(window=self._window) as pipeline:
            workers = [asyncio.create_task(self._worker(queue, pipeline)) for _ in range(min(self._window, len(by_claim)))]
            try:
                await asyncio.gather(*workers)
            finally:
                for worker in workers:
                    worker.cancel()
        self.report.rejected.sort(key=lambda e: e.number)
        return self.report

    async def _worker(self, queue: Iterator[tuple[str, list[Line]]], pipeline: Pipeline) -> None:
        for claim_id, lines in queue:
            await self._claim(claim_id, lines, pipeline)

    async def _claim(self, claim_id: str, lines: list[Line], pipeline: Pipeline) -> None:
        state = claim_state(claim_id, await self._log.read_claim(claim_id))
        for line in lines:
            for _ in range(CONFLICT_RETRIES):
                try:
                    await self._line(line, state, pipeline)
                    break
                except ConflictError:  # another writer moved the claim: read it again, decide again
                    state = claim_state(claim_id, await self._log.read_claim(claim_id))
            else:
                self._reject(line, "write_conflict", f"{claim_id} kept changing during {CONFLICT_RETRIES} attempts")
            self._on_line(1)

    async def _line(self, line: Line, state: ClaimState, pipeline: Pipeline) -> None:
        command = line.command
        try:
            if already_done(command, state, line.event_id) is not None:
                self.report.present += 1
                return
            others = referenced_claims(command)
            existing = await self._existing(others, before=line.number) if others else frozenset()
            ctx = Context(self._actor, line.event_id, self._clock(), existing_claims=existing, prev_hash=state.head_hash)
            events = decide(command, state, ctx)
        except Rejected as rejected:
            self._reject(line, rejected.reason, rejected.message)
            return
        try:
            appended = await (await pipeline.submit(command.claim_id, events, expected_seq=state.head_seq, prev_hash=state.head_hash))
        except ConflictError:
            raise  # a LogError too, but one the caller answers by reading the claim again
        except LogError as error:
            self._reject(line, "log_error", str(error))
            return
        [event] = events  # every command produces one event
        state.evolve(event, appended.last_seq, appended.last_hash)
        if appended.duplicate:
            self.report.present += 1
        else:
            self.report.accepted += 1
            self.report.last_seq = max(self.report.last_seq, appended.last_seq)

    async def _existing(self, claim_ids: set[str], *, before: int) -> frozenset[str]:
        found = set()
        for claim_id in claim_ids:
            drafted_at = self._drafted_at.get(claim_id)
            if drafted_at is not None and drafted_at < before:
                found.add(claim_id)
                continue
            if claim_id not in self._known:
                self._known[claim_id] = bool(await self._log.read_claim(claim_id, up_to_seq=self._start_head))
            if self._known[claim_id]:
                found.add(claim_id)
        return frozenset(found)

    def _reject(self, line: Line, reason: str, message: str) -> None:
        self.report.rejected.append(LineError(line.number, reason, message))


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
