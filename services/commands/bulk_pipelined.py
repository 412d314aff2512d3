"""The pipelined path of bulk ingestion, for a stream without atomic batches: one claim's lines in
order, many claims at once, each event its own acknowledged append.

It holds the whole file's lines grouped by claim (memory grows with the file); the batched path
(``services.commands.bulk``) streams instead.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime

from events import Actor
from events.envelope import utc_now
from services.commands.bulk_lines import BulkReport, Line, LineError
from services.commands.decide import Context, Rejected, decide, referenced_claims
from services.commands.service import already_done
from services.commands.state import ClaimState, claim_state
from services.log import ClaimLog, ConflictError, LogError, Pipeline

CONFLICT_RETRIES = 5


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
            if already_done(command, state, line.event_id, self._actor) is not None:
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
