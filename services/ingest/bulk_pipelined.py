"""The pipelined path of bulk ingestion, for a stream without atomic batches: one claim's lines in
order, many claims at once, each event its own acknowledged append.

It holds the whole file's lines grouped by claim (memory grows with the file); the batched path
(``services.ingest.bulk``) streams instead.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from events import Actor
from events.envelope import utc_now
from services.admission import gate_for
from services.commands.attempts import existing_claims, until_stored
from services.commands.claim_state import ClaimState, claim_state
from services.commands.decide import Context, Rejected, decide, referenced_claims
from services.commands.service import already_done
from services.commands.slugs import slug_owners
from services.ingest.bulk_lines import BulkReport, Line, LineError
from services.log import ClaimLog, ConflictError, LogError, Pipeline


class PipelinedIngest:
    """Decide and append a file's commands, ``window`` claims at a time, one acknowledged event each."""

    def __init__(
        self, log: ClaimLog, actor: Actor, *, window: int = 512, clock: Callable[[], datetime] = utc_now,
        on_line: Callable[[int], None] = lambda n: None, report: BulkReport | None = None,
    ) -> None:
        self._log, self._actor, self._window, self._clock, self._on_line = log, actor, window, clock, on_line
        self._known: dict[str, bool] = {}
        self._drafted_at: dict[str, int] = {}
        self._start_head = 0
        self._slugs = slug_owners(log)
        self._slug_owners: dict[str, str] = {}  # claim -> the owner of its draft's slug
        self._slugs_taken: dict[str, str] = {}  # slugs this run took whose drafts are not stored yet
        self.report = report or BulkReport()

    async def run(self, lines: list[Line]) -> BulkReport:
        """Apply ``lines``; returns the report (rejections sorted by line)."""
        by_claim: dict[str, list[Line]] = defaultdict(list)
        for line in lines:
            by_claim[line.command.claim_id].append(line)
            if line.command.command == "draft_claim":
                self._drafted_at.setdefault(line.command.claim_id, line.number)
        self.report.lines += len(lines)
        self._start_head = await self._log.head()
        await self._take_slugs(lines)
        queue = iter(by_claim.items())
        async with self._log.pipeline(window=self._window) as pipeline:
            workers = [asyncio.create_task(self._worker(queue, pipeline)) for _ in range(min(self._window, len(by_claim)))]
            try:
                await asyncio.gather(*workers)
            finally:
                for worker in workers:
                    worker.cancel()
                await self._slugs.give_back_many(self._slugs_taken)  # their drafts were not stored
        self.report.rejected.sort(key=lambda e: e.number)
        return self.report

    async def _take_slugs(self, lines: list[Line]) -> None:
        """Take every draft's slug for its claim (of two claims with one slug, the first), in batches."""
        drafts = [(line.command.claim_id, line.command.slug) for line in lines if line.command.command == "draft_claim"]
        wanted: dict[str, str] = {}
        for claim_id, slug in drafts:
            wanted.setdefault(slug, claim_id)
        owners, taken = await self._slugs.take_many(wanted)
        self._slugs_taken = {slug: wanted[slug] for slug in taken}
        self._slug_owners = {claim_id: owners[slug] for claim_id, slug in drafts}

    async def _worker(self, queue: Iterator[tuple[str, list[Line]]], pipeline: Pipeline) -> None:
        for claim_id, lines in queue:
            await self._claim(claim_id, lines, pipeline)

    async def _claim(self, claim_id: str, lines: list[Line], pipeline: Pipeline) -> None:
        view = _View(self._log, claim_id, await read_state(self._log, claim_id))
        for line in lines:
            try:
                await until_stored(claim_id, partial(self._line, line, view, pipeline), read_again=view.read_again)
            except Rejected as rejected:
                self._reject(line, rejected.reason, rejected.message)
            self._on_line(1)

    async def _line(self, line: Line, view: _View, pipeline: Pipeline) -> None:
        command, state = line.command, view.state
        try:
            if already_done(command, state, line.event_id, self._actor) is not None:
                self.report.present += 1
                return
            others = referenced_claims(command)
            existing = await existing_claims(others, partial(self._exists_before, before=line.number))
            owner = self._slug_owners.get(command.claim_id) if command.command == "draft_claim" else None
            ctx = Context(
                actor=self._actor, event_id=line.event_id, now=self._clock(), existing_claims=existing,
                prev_hash=state.head_hash, slug_owner=owner,
            )
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
        if command.command == "draft_claim" and self._slugs_taken.get(command.slug) == command.claim_id:
            del self._slugs_taken[command.slug]  # stored: the slug stays the claim's
        if appended.duplicate:
            self.report.present += 1
        else:
            self.report.accepted += 1
            self.report.last_seq = max(self.report.last_seq, appended.last_seq)

    async def _exists_before(self, claim_id: str, *, before: int) -> bool:
        """Whether the claim is drafted by a line before ``before``, or was in the log when the run started."""
        drafted_at = self._drafted_at.get(claim_id)
        if drafted_at is not None and drafted_at < before:
            return True
        if claim_id not in self._known:
            self._known[claim_id] = (await read_state(self._log, claim_id, up_to_seq=self._start_head)).drafted
        return self._known[claim_id]

    def _reject(self, line: Line, reason: str, message: str) -> None:
        self.report.rejected.append(LineError(line.number, reason, message))


@dataclass
class _View:
    """The claim's state its lines are decided against, read again when another writer moved it."""

    log: ClaimLog
    claim_id: str
    state: ClaimState

    async def read_again(self) -> None:
        """Another writer moved the claim: the next attempt decides against the log's state of it."""
        self.state = await read_state(self.log, self.claim_id)


async def read_state(log: ClaimLog, claim_id: str, *, up_to_seq: int | None = None) -> ClaimState:
    """The claim's state as every reader shows it (its events up to ``up_to_seq``, admitted through the
    gate): a forged draft makes no claim, a forged retraction closes none."""
    stored = await log.read_claim(claim_id, up_to_seq=up_to_seq)
    return claim_state(claim_id, stored, await gate_for(log, (item.signature for item in stored)))
