"""Bulk ingestion of commands from JSON Lines: streamed line by line, decided claim by claim, appended in
atomic batches that span claims.

Each line is one command (the JSON ``POST /commands`` takes). Lines of one claim apply in file order,
each decided against the state the previous ones left. Decided events gather into a batch of up to
the server's limit, over as many claims as come; each claim's first event in it expects the claim's
last acknowledged sequence. While one batch waits for its acknowledgement the next one is decided
and sent, unless it holds a claim with events in the first (batches end where a claim's lines end
when they can, so that they seldom do).
The clock is read once a batch: its events share the time they were decided at (within milliseconds).

A refused batch is not lost work: the claims whose last sequence moved are found, every line of the
refused batch (and of those sent or decided after it) is decided again against the claims as the log
now holds them, and the lines that then fail are reported with their numbers and reasons; the rest
goes out again. A line refused this way ``ATTEMPTS`` times is reported as a conflict.

Re-running a file publishes nothing new: event ids come from the lines (``bulk_lines``), and a line
whose event is already in the claim's history counts as already present.

A draft's slug is taken for its claim before the draft is decided (``services/commands/slugs.py``),
with the claims of its span of lines, a thousand slugs to one atomic batch on the bucket: a draft whose
slug belongs to another claim is refused (``slug_taken``), and the slugs of drafts that did not land are
given back when the run ends.

A reference to another claim (``superseded_by``, ``related_claim_id``) holds once that claim has an
acknowledged event: a line referring to a claim whose events still wait for an acknowledgement waits
for them first, so a later line never makes an earlier reference hold.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from events import Actor, Event, encode
from events.envelope import utc_now
from events.log_entry import MAX_EVENT_BYTES
from services.commands.attempts import ATTEMPTS
from services.commands.decide import REFERENCES, Context, Rejected, referenced_claims, ruling, too_large
from services.commands.service import already_done
from services.commands.slugs import slug_owners
from services.ingest.bulk_claims import DEFAULT_CAPACITY, ClaimCache, ClaimSlot
from services.ingest.bulk_events import assembled, sound_time_and_actor
from services.ingest.bulk_lines import BulkReport, Line, LineError, Parsed, with_event_id
from services.log import ClaimLog, LogError, event_hash
from services.log.batches import (
    ACK_TIMEOUT,
    MAX_BATCH_EVENTS,
    AtomicBatches,
    ClaimShare,
    first_sequence,
    moved_claims,
    stream_takes_batches,
)

log = logging.getLogger(__name__)
READ_AHEAD = 2000  # lines whose claims are fetched from the log together, before they are decided
SPANS_AHEAD = 2  # spans of lines whose claims are being fetched while one is decided
READ_CHUNK = 250  # lines read (validated) at a time, one chunk as one is taken: reading goes along with deciding
PRESENT = "present"
IN_FLIGHT = 2  # batches sent and not yet acknowledged: one being synced, the next on its way
CLAIM_SLACK = 16  # events a batch may go out short of full, so that it ends where a claim's lines end


@dataclass
class Round:
    """Lines decided for one batch, what those that made no event came to, and the batch's events by claim."""

    lines: list[Line] = field(default_factory=list)
    others: list[str | LineError] = field(default_factory=list)  # ``PRESENT`` or why the line was refused
    shares: dict[str, ClaimShare] = field(default_factory=dict)
    events: int = 0
    now: datetime | None = None  # when its lines are decided: the clock is read once a batch
    sound: bool = False  # whether that time and the actor pass the envelope's checks (``bulk_events``)


class BulkIngest:
    """Decide and append a stream of parsed lines in atomic batches over many claims.

    It has no effect on the process beyond its run: ``after_batch`` is called after each acknowledged
    batch, when what is alive is the run's working set (the claims' states, the lines on their way), for
    a command to apply its process-wide policy there (``claimlog ingest`` freezes it out of garbage
    collection: ``services/ingest/cli.py``)."""

    def __init__(
        self, log: ClaimLog, actor: Actor, *, window: int = 512, clock: Callable[[], datetime] = utc_now,
        on_line: Callable[[int], None] = lambda n: None, capacity: int = DEFAULT_CAPACITY, batch: int = MAX_BATCH_EVENTS,
        read_ahead: int = READ_AHEAD, after_batch: Callable[[], None] = lambda: None,
    ) -> None:
        self._log, self._actor, self._window, self._clock, self._on_line = log, actor, window, clock, on_line
        self._after_batch = after_batch
        self._claims = ClaimCache(log, capacity=capacity)
        self._batch, self._read_ahead = min(batch, MAX_BATCH_EVENTS), read_ahead
        self._cut = self._batch - min(CLAIM_SLACK, self._batch // 16)  # from here on a batch goes out where a claim's lines end
        self._open: Round = Round()
        self._flight: deque[tuple[Round, asyncio.Future | None]] = deque()  # batches sent, oldest first
        self._redo: list[tuple[int, Line]] = []  # lines to decide again, smallest number first
        self._attempts: dict[int, int] = {}
        self._ahead: deque[Parsed | Line | LineError] = deque()  # the chunk being decided
        self._ready: deque[Parsed | Line | LineError] = deque()  # the rest of the lines whose claims are fetched
        self._coming: deque[tuple[list, asyncio.Future]] = deque()  # the next spans of lines, each with the fetch of its claims
        self._reading: list[Parsed | Line | LineError] = []  # the lines after those, read as chunks are taken
        # A claim whose lines in a span start with its draft is taken to be new, without asking the log
        # (asking costs the server more than storing the claim's events): if it has events after all,
        # its first batch, expecting none, is refused and the claim read. The first such refusal ends
        # the taking for the rest of the run (a re-run, or a file of claims the log holds).
        self._presume_new = True
        self._slugs = slug_owners(log)
        self._slug_owners: dict[str, str] = {}  # claim -> the owner of its draft's slug, for the drafts read ahead
        self._slugs_taken: dict[str, str] = {}  # slugs this run took whose drafts are not acknowledged yet
        self.report = BulkReport()

    async def run(self, items: Iterable[Parsed | Line | LineError]) -> BulkReport:
        """Apply the lines; returns the report (rejections sorted by line)."""
        if not await stream_takes_batches(self._log.nc, self._log.stream):
            return await self._pipelined(items)
        source = iter(items)
        try:
            async with AtomicBatches(self._log.nc, self._log.stream, layout=self._log.layout, signer=self._log.signer) as self._batches:
                while (item := self._ahead.popleft() if self._ahead and not self._redo else await self._next(source)) is not None or await self._flush():
                    if isinstance(item, LineError):
                        self._finish_line(item.number, item)
                    elif item is not None:
                        if not self._take_held(item):
                            await self._take(item)
                        if self._open.events >= self._cut and (self._open.events >= self._batch or not self._continued(item)):
                            await self._ship()
        finally:
            for _, fetching in self._coming:
                fetching.cancel()
            await self._slugs.give_back_many(self._slugs_taken)  # those whose drafts the log does not hold
            self._claims.close()
        self.report.rejected.sort(key=lambda e: e.number)
        return self.report

    async def _next(self, source: Iterator[Parsed | Line | LineError]) -> Parsed | Line | LineError | None:
        if self._redo:
            return heapq.heappop(self._redo)[1]
        if not self._ahead:
            await self._take_chunk(source)
        return self._ahead.popleft() if self._ahead else None

    async def _take_chunk(self, source: Iterator[Parsed | Line | LineError]) -> None:
        """Move the next chunk of ready lines to be decided, and read as many lines from the source.

        Lines come in spans of ``read_ahead``: the ready one (its claims fetched), ``SPANS_AHEAD`` coming
        ones (their claims being fetched, each in one request, one after the other, while the ready one
        is decided), and the one being read for after those. With batches in flight the server answers
        a fetch only after them: two spans ahead, the answer is there before it is needed. Reading a
        chunk as one is taken keeps validating lines going along with deciding them."""
        if not self._ready:
            if self._coming:
                lines, fetching = self._coming.popleft()
                await fetching
                self._ready.extend(lines)
                self.report.lines += len(lines)
            while len(self._coming) < SPANS_AHEAD:
                self._reading.extend(itertools.islice(source, self._read_ahead - len(self._reading)))  # at the start, whole
                if not self._reading:
                    break
                self._coming.append(self._fetching(self._reading))
                self._reading = []
            if not self._ready and self._coming:  # the start: nothing was ready yet
                return await self._take_chunk(source)
        count = min(READ_CHUNK, len(self._ready))
        self._ahead.extend([self._ready.popleft() for _ in range(count)])
        self._reading.extend(itertools.islice(source, count))

    def _fetching(self, lines: list[Parsed | Line | LineError]) -> tuple[list, asyncio.Future]:
        claims, new, drafts = set(), set(), []
        for item in lines:
            if not isinstance(item, LineError):
                command = item.command
                if command.claim_id not in claims:
                    claims.add(command.claim_id)
                    if command.command == "draft_claim" and self._presume_new:
                        new.add(command.claim_id)  # its lines start with its draft: taken to be a new claim
                if command.command == "draft_claim":
                    drafts.append((command.claim_id, command.slug))
                elif command.command in REFERENCES:  # a few lines: the rest skip the call
                    claims.update(referenced_claims(command))
        before = self._coming[-1][1] if self._coming else None
        return lines, asyncio.ensure_future(self._fetch(before, claims, new, drafts))

    async def _fetch(self, before: asyncio.Future | None, claims: set[str], new: set[str], drafts: list[tuple[str, str]]) -> None:
        if before is not None:
            await asyncio.wait([before])  # the claim cache fetches one span's claims at a time
        await self._claims.prefetch(claims, new=new)
        await self._take_slugs(drafts)

    async def _take_slugs(self, drafts: list[tuple[str, str]]) -> None:
        """Take the slugs of the span's drafts for their claims (of two claims with one slug, the first),
        in batches; each draft is decided against its slug's owner. A claim drafted already takes nothing:
        its draft line is refused, or found present, anyway."""
        wanted: dict[str, str] = {}
        for claim_id, slug in drafts:
            if not self._claims.drafted(claim_id):
                wanted.setdefault(slug, claim_id)
        if not wanted:
            return
        owners, taken = await self._slugs.take_many(wanted)
        self._slugs_taken.update((slug, wanted[slug]) for slug in taken)
        for claim_id, slug in drafts:
            if slug in owners:
                self._slug_owners[claim_id] = owners[slug]

    def _take_held(self, item: Parsed | Line) -> bool:
        """Decide a line at once when its claim is held and it names no other claim (most lines); False
        when it needs awaiting (its claim to read, or other claims to wait for): ``_take``."""
        command = item.command
        if command.command in REFERENCES:
            return False
        slot = self._claims.peek(command.claim_id)
        if slot is None:
            return False
        self._decided(item if isinstance(item, Line) else with_event_id(item, self._actor, slot.copies), slot, frozenset())
        return True

    async def _take(self, item: Parsed | Line) -> None:
        claim_id = item.command.claim_id
        slot = self._claims.peek(claim_id) or await self._claims.get(claim_id)
        line = item if isinstance(item, Line) else with_event_id(item, self._actor, slot.copies)
        others = referenced_claims(line.command)
        existing: frozenset[str] = frozenset()
        if others:
            if await self._waits_for(others) and await self._flush():
                heapq.heappush(self._redo, (line.number, line))  # a batch was refused: earlier lines go first
                return
            existing = frozenset([o for o in others if (await self._claims.get(o)).acked_seq > 0])
            slot = await self._claims.get(claim_id)  # held still, unless reading the others evicted it
        self._decided(line, slot, existing)

    async def _waits_for(self, claim_ids: set[str]) -> bool:
        return any([(await self._claims.get(claim_id)).unacked for claim_id in claim_ids])

    def _decided(self, line: Line, slot: ClaimSlot, existing: frozenset[str]) -> None:
        """Decide ``line`` against its claim's state; an event it makes joins the open batch, chained to
        the claim's events before it (its sequence is known once the batch is acknowledged)."""
        state, round_ = slot.state, self._open
        try:
            if (self._actor.id, line.event_id) in state.written and already_done(line.command, state, line.event_id, self._actor) is not None:
                round_.lines.append(line)
                round_.others.append(PRESENT)
                return
            now = round_.now
            if now is None:
                now = round_.now = self._clock()
                round_.sound = sound_time_and_actor(now, self._actor)
            command = line.command
            owner = self._slug_owners.get(command.claim_id) if command.command == "draft_claim" else None
            ctx = Context(actor=self._actor, event_id=line.event_id, now=now, existing_claims=existing, prev_hash=state.head_hash, slug_owner=owner)
            event = assembled(command, ctx, ruling(command, state, ctx), vouched=round_.sound)  # decide's rules and its event
        except Rejected as rejected:
            round_.lines.append(line)
            round_.others.append(LineError(line.number, rejected.reason, rejected.message))
            return
        data = encode(event)
        round_.lines.append(line)
        if len(data) > MAX_EVENT_BYTES:  # it would not fit one transparency-log entry: this line alone is refused
            refused = too_large(line.command, len(data))
            round_.others.append(LineError(line.number, refused.reason, refused.message))
            return
        share = round_.shares.get(event.claim_id)
        if share is None:
            share = round_.shares[event.claim_id] = ClaimShare(event.claim_id, expected_seq=0)
        share.linked.append((event, data))
        state.evolve(event, -1, event_hash(data))
        if not slot.unacked:
            self._claims.hold(event.claim_id, slot)  # a slot with events waiting is held already
        slot.unacked += 1
        round_.events += 1

    def _continued(self, item: Parsed | Line) -> bool:
        """Whether the next line is of the same claim as ``item`` (a batch sent now would split its lines)."""
        following = self._ahead[0] if self._ahead and not self._redo else None
        return following is not None and not isinstance(following, LineError) and following.command.claim_id == item.command.claim_id

    async def _flush(self) -> bool:
        """Send what is decided and wait for every batch; True when one was refused (lines wait to be redone)."""
        return await self._ship() or await self._settle()

    async def _ship(self) -> bool:
        """Send the open batch, once the batches in flight allow it; True when one of those was refused.

        It goes out while the one before it waits for its acknowledgement (the server syncs one while
        the next is decided and sent), unless one of its claims has events in a batch still in flight:
        its first event's expected sequence is known only once that batch is acknowledged."""
        while self._flight and (len(self._flight) >= IN_FLIGHT or self._follows(self._open)):
            if await self._settle_oldest():
                return True
        sending, self._open = self._open, Round()
        for share in sending.shares.values():
            share.expected_seq = self._claims.held(share.claim_id).acked_seq
        future = await self._batches.send(list(sending.shares.values())) if sending.events else None
        self._flight.append((sending, future))
        return False

    def _follows(self, round_: Round) -> bool:
        """Whether a claim of ``round_`` has events in a batch in flight (its slot counts more events waiting than this batch's)."""
        held = self._claims.held
        return any(held(claim_id).unacked > len(share.linked) for claim_id, share in round_.shares.items())

    async def _settle(self) -> bool:
        """Wait for every batch in flight; True when one was refused."""
        while self._flight:
            if await self._settle_oldest():
                return True
        return False

    async def _settle_oldest(self) -> bool:
        sending, future = self._flight.popleft()
        try:
            first = await self._acknowledged(sending, future)
        except (LogError, TimeoutError) as error:
            await self._refused(sending, error)
            return True
        self._finish(sending, first)
        self._after_batch()
        return False

    @staticmethod
    async def _acknowledged(sending: Round, future: asyncio.Future | None) -> int:
        """The sequence of the batch's first event (0 for a batch without events); raises when it was refused."""
        if future is None:
            return 0
        return first_sequence(await asyncio.wait_for(future, ACK_TIMEOUT), sending.events)

    def _finish(self, done: Round, first_seq: int) -> None:
        seq = first_seq
        for share in done.shares.values():
            seq += len(share.linked)
            slot = self._claims.held(share.claim_id)
            slot.acked_seq, slot.unacked, slot.presumed = seq - 1, slot.unacked - len(share.linked), False
        if done.events:
            self.report.last_seq = max(self.report.last_seq, first_seq + done.events - 1)
        report = self.report
        report.accepted += done.events  # a line accepted made one event
        for outcome in done.others:
            if outcome is PRESENT:
                report.present += 1
            else:
                report.rejected.append(outcome)
        if self._attempts:
            for line in done.lines:
                self._attempts.pop(line.number, None)
        self._settle_slugs(done)
        if done.lines:  # one round's lines at once: the progress bar advances once a batch
            self._on_line(len(done.lines))

    def _settle_slugs(self, done: Round) -> None:
        """A draft acknowledged keeps its slug for good; a refused one's slug is given back as the run ends."""
        for line in done.lines:
            command = line.command
            if command.command == "draft_claim":
                self._slug_owners.pop(command.claim_id, None)
                share = done.shares.get(command.claim_id)
                if share is not None and share.linked[0][0].type == "ClaimDrafted" and self._slugs_taken.get(command.slug) == command.claim_id:
                    del self._slugs_taken[command.slug]

    def _finish_line(self, number: int, outcome: Event | str | LineError) -> None:
        self._attempts.pop(number, None)
        if isinstance(outcome, LineError):
            self.report.rejected.append(outcome)
        elif outcome == PRESENT:
            self.report.present += 1
        else:
            self.report.accepted += 1
        self._on_line(1)

    async def _refused(self, refused: Round, error: Exception) -> None:
        """Every line of the refused batch, of any refused after it, and of the open one is decided again
        against the log as it is now. A batch sent after the refused one holds none of its claims: it is
        stored or refused on its own, and its lines are done or decided again accordingly."""
        batches = [(refused, error)]
        while self._flight:
            sending, future = self._flight.popleft()
            try:
                self._finish(sending, await self._acknowledged(sending, future))
            except (LogError, TimeoutError) as later:
                batches.append((sending, later))
        shares = [share for batch, _ in batches for share in batch.shares.values()]
        moved = await moved_claims(self._log.nc, self._log.stream, shares, layout=self._log.layout)
        for batch, why in batches:
            log.info("a batch of %d events was refused (%s); claims moved: %s", batch.events, why, sorted(moved) or "none")
        lines = [line for batch, _ in batches for line in batch.lines] + self._open.lines
        again = {line.command.claim_id for line in lines}
        if self._coming:
            await asyncio.wait([fetching for _, fetching in self._coming])  # the cache fetches one thing at a time
        if self._presume_new and any(share.expected_seq == 0 and share.claim_id in moved for share in shares):
            self._presume_new = False  # a claim taken (or found) to be new was not: ask the log from here on
            again |= self._claims.presumed()  # and about those taken already
        self._claims.forget(again)
        self._open = Round()
        await self._claims.prefetch(again)  # read together, not one by one as their lines come again
        for line in lines:
            if moved and line.command.claim_id not in moved:
                heapq.heappush(self._redo, (line.number, line))  # not at fault: no attempt counted
                continue
            attempts = self._attempts[line.number] = self._attempts.get(line.number, 0) + 1
            if attempts < ATTEMPTS:
                heapq.heappush(self._redo, (line.number, line))
            else:
                reason = "write_conflict" if moved else "log_error"
                self._finish_line(line.number, LineError(line.number, reason, f"{line.command.claim_id}: {error} ({attempts} attempts)"))

    async def _pipelined(self, items: Iterable[Parsed | Line | LineError]) -> BulkReport:
        """The path for a stream without atomic batches (already warned about): every line held, then appended one by one."""
        from collections import Counter

        from services.ingest.bulk_pipelined import PipelinedIngest

        copies: dict[str, Counter[int]] = {}
        lines = []
        for item in items:
            self.report.lines += 1
            if isinstance(item, LineError):
                self._finish_line(item.number, item)
            else:
                lines.append(item if isinstance(item, Line) else with_event_id(item, self._actor, copies.setdefault(item.command.claim_id, Counter())))
        self.report.lines -= len(lines)
        ingest = PipelinedIngest(self._log, self._actor, window=self._window, clock=self._clock, on_line=self._on_line, report=self.report)
        return await ingest.run(lines)
