"""Carry out one command: read the claim, decide, append with the expected sequence, answer with sequences.

Retries and races are safe by construction:

- the event id is the producer's own, or derived from the actor, the claim and the ``Idempotency-Key``,
  so a retried command finds its event already in the claim's history (however long ago) and answers
  with the sequence it was stored at, publishing nothing; JetStream's duplicate window catches two
  copies racing each other. An id names one event of its writer on its claim: an event of another
  actor with the same id is another event (both are stored and folded), never this command's, and the
  message id JetStream deduplicates by is derived from the actor and the claim too
  (``services/log/writer.py``), so no one can make another's write a "duplicate" of theirs, nor block it;
- the append expects the claim's last sequence: when another writer got there first, the command
  is decided again against the new state (without ``If-Match``), or refused with 409 (with it).

The states of recently used claims stay in memory, checked against the log on every command: the
claim's last sequence (one indexed lookup) says whether the cached state is current, and when it is
not, only the events after it are read. A claim's state is therefore never older than the log, and a
busy claim is not read in full for each of its commands.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from events import Actor, Event, new_event_id
from events.envelope import utc_now
from services.admission import gate_for
from services.commands.attempts import ReadAgain, existing_claims, until_stored
from services.commands.claim_state import ClaimState, claim_state
from services.commands.decide import Context, Kind, Rejected, decide, referenced_claims
from services.commands.models import Command
from services.commands.slugs import SlugOwners, slug_owners
from services.log import ClaimLog, ConflictError, LogError

CACHED_CLAIMS = 10_000
IDEMPOTENCY_NAMESPACE = uuid.UUID("6f1c2a0e-3d4b-5c6d-8e9f-0a1b2c3d4e5f")


def idempotent_event_id(actor: Actor, claim_id: str, key: str, index: int = 0) -> str:
    """The event id a command with this idempotency key gets, the same on every retry by this actor on
    this claim (the same key on another claim is another command)."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{actor.id}\x00{claim_id}\x00{key}\x00{index}"))


def unscoped_event_id(actor: Actor, key: str, index: int = 0) -> str:
    """The id a key gave before ids named their claim: a retry of such a command still finds its event."""
    return str(uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{actor.id}\x00{key}\x00{index}"))


@dataclass(frozen=True)
class StoredRef:
    """One event a command produced: its id, type and where the log stored it."""

    event_id: str
    type: str
    seq: int


@dataclass(frozen=True)
class Outcome:
    """What a command did: the events at their sequences, and whether it was a retry of one already done."""

    claim_id: str
    command: str
    events: list[StoredRef]
    duplicate: bool

    @property
    def last_seq(self) -> int:
        """The sequence to read after (``?after=``) to see this write."""
        return self.events[-1].seq


@dataclass
class _ClaimTurn:
    """The lock the commands on one claim take turns with, and how many of them hold it or wait for it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    commands: int = 0


class CommandService:
    """Decides commands against the log and appends what they produce."""

    def __init__(
        self, log: ClaimLog, *, clock: Callable[[], datetime] = utc_now, cached_claims: int = CACHED_CLAIMS,
        slugs: SlugOwners | None = None,
    ) -> None:
        """``slugs``: where slugs' owners are kept; by default a bucket beside the log (services/commands/slugs.py)."""
        self._log, self._clock = log, clock
        self._slugs = slugs if slugs is not None else slug_owners(log)
        self._states: OrderedDict[str, ClaimState] = OrderedDict()
        self._cached_claims = cached_claims
        self._claim_turns: dict[str, _ClaimTurn] = {}

    async def execute(
        self,
        command: Command,
        actor: Actor,
        *,
        idempotency_key: str | None = None,
        expected_version: int | None = None,
    ) -> Outcome:
        """Carry out ``command`` as ``actor``; raises ``Rejected`` when it does not apply.

        Commands on one claim take turns in this process (they would only refuse each other's expected
        sequence); other processes writing the same claim are caught by the expected sequence.
        """
        turn = self._claim_turns.setdefault(command.claim_id, _ClaimTurn())
        turn.commands += 1
        try:
            async with turn.lock:
                return await self._execute(command, actor, idempotency_key, expected_version)
        finally:
            turn.commands -= 1
            if turn.commands == 0:  # no command holds or awaits the claim: drop it, keep the map small
                self._claim_turns.pop(command.claim_id, None)

    async def _execute(
        self, command: Command, actor: Actor, idempotency_key: str | None, expected_version: int | None
    ) -> Outcome:
        event_id = command.event_id or (
            idempotent_event_id(actor, command.claim_id, idempotency_key) if idempotency_key else new_event_id()
        )
        earlier = unscoped_event_id(actor, idempotency_key) if idempotency_key and not command.event_id else None
        existing = await existing_claims(referenced_claims(command), self._drafted)
        slug = _Slug(command.slug if command.command == "draft_claim" else None)
        try:
            return await self._attempts(command, actor, event_id, earlier, existing, expected_version, slug)
        except Rejected:
            if slug.taken:  # refused, so not stored: the slug is free again
                await self._slugs.give_back(slug.slug, command.claim_id)
            raise
        except LogError:
            if slug.taken:  # the append failed: perhaps stored all the same, so the log is asked first
                await self._slugs.give_back_unless_drafted(slug.slug, command.claim_id)
            raise

    async def _attempts(self, command, actor, event_id, earlier, existing, expected_version, slug: _Slug) -> Outcome:
        # A cached state is used as it is: the append's expected sequence catches a claim that moved
        # meanwhile. Only a state checked against the log may refuse a command.
        view = _View(self._states.get(command.claim_id))

        async def attempt() -> Outcome:
            if view.state is None or (view.checked is False and _must_check(view.state, expected_version)):
                view.state, view.checked = await self.state(command.claim_id), True
            return await self._attempt(command, actor, event_id, earlier, existing, expected_version, slug, view)

        return await until_stored(command.claim_id, attempt, read_again=view.forget)

    async def _attempt(self, command, actor, event_id, earlier, existing, expected_version, slug: _Slug, view: _View) -> Outcome:
        state = view.state
        done = already_done(command, state, event_id, actor)
        if done is None and earlier is not None:
            done = already_done(command, state, earlier, actor)
        if done is not None:
            return done
        try:
            if expected_version is not None and expected_version != state.head_seq:
                raise stale(command.claim_id, expected_version, state.head_seq)
            if slug.slug is not None and slug.owner is None and not state.drafted:
                slug.owner, slug.taken = await self._slugs.take(slug.slug, command.claim_id)
            ctx = Context(
                actor=actor, event_id=event_id, now=self._clock(), correlation_id=event_id,
                existing_claims=existing, prev_hash=state.head_hash, slug_owner=slug.owner,
            )
            events = decide(command, state, ctx)
        except Rejected:
            if view.checked:
                raise
            raise ReadAgain from None  # perhaps refused only because the cached state is behind: check it
        try:
            appended = await self._log.append(command.claim_id, events, expected_seq=state.head_seq, prev_hash=state.head_hash)
        except ConflictError:
            if expected_version is not None:
                raise stale(command.claim_id, expected_version, None) from None
            raise  # another writer moved the claim: decide again against what it did
        slug.taken = False  # stored: the slug stays the claim's
        if not appended.duplicate and len(events) == 1:  # the cached state takes what was just written
            state.evolve(events[0], appended.last_seq, appended.last_hash)
        return Outcome(command.claim_id, command.command, refs(events, appended.first_seq), appended.duplicate)

    async def _drafted(self, claim_id: str) -> bool:
        """Whether a claim a command refers to exists: drafted by an event the gate admits (junk or a forged
        draft on its subject makes no claim)."""
        return (await self.state(claim_id)).drafted

    async def state(self, claim_id: str) -> ClaimState:
        """The claim's current state: the cached one brought up to the log's head, or read in full.

        ``read_claim`` asks for the claim's last sequence itself, so a current cached state costs that
        one indexed lookup and no scan.
        """
        state = self._states.get(claim_id)
        stored = await self._log.read_claim(claim_id, after_seq=0 if state is None else state.head_seq)
        gate = await gate_for(self._log, (item.signature for item in stored))
        if state is None:
            state = claim_state(claim_id, stored, gate)
        else:
            for item in stored:
                state.take(item, gate)
        self._states[claim_id] = state
        self._states.move_to_end(claim_id)
        if len(self._states) > self._cached_claims:
            self._states.popitem(last=False)
        return state


@dataclass
class _View:
    """The claim's state an attempt decides against, and whether it was checked against the log."""

    state: ClaimState | None
    checked: bool = False

    async def forget(self) -> None:
        """Another writer moved the claim, or the state may be behind: the next attempt reads it again."""
        self.state = None


@dataclass
class _Slug:
    """A draft's slug: who owns it, and whether this command took it (and gives it back if not stored)."""

    slug: str | None
    owner: str | None = None
    taken: bool = False


def _must_check(state: ClaimState, expected_version: int | None) -> bool:
    """An ``If-Match`` the cached state disagrees with is decided on the log's word, not the cache's."""
    return expected_version is not None and expected_version != state.head_seq


def already_done(command: Command, state: ClaimState, event_id: str, actor: Actor) -> Outcome | None:
    """The outcome of an earlier run of the same command (same event id, same actor), if the log has it.

    Repeats are recognised per actor: an event of another actor with this id is another event, never
    this command's, so it neither answers this command as a duplicate nor refuses it.
    """
    written = state.written.get((actor.id, event_id))
    if written is None:
        return None
    expected = command.event_type().model_fields["type"].default
    if written.type != expected:
        raise Rejected(
            Kind.INVALID,
            "idempotency_key_reused",
            f"event {event_id} of {command.claim_id} is a {written.type}, not a {expected}: "
            "an idempotency key (or event id) names one command only",
        )
    differing = sorted(name for name, value in command.facts().items() if getattr(written.event, name, None) != value)
    if differing:
        raise Rejected(
            Kind.INVALID,
            "idempotency_key_reused",
            f"event {event_id} of {command.claim_id} was a {written.type} with other {', '.join(differing)}: "
            "an idempotency key (or event id) names one command only; send a new one for a new command",
        )
    return Outcome(command.claim_id, command.command, [StoredRef(event_id, written.type, written.seq)], True)


def refs(events: list[Event], first_seq: int) -> list[StoredRef]:
    """Where each appended event was stored."""
    return [StoredRef(e.event_id, e.type, first_seq + i) for i, e in enumerate(events)]


def stale(claim_id: str, expected: int, current: int | None) -> Rejected:
    """The refusal of a write made against an old version of the claim."""
    now = f"it is at {current}" if current is not None else "another writer has just moved it"
    return Rejected(Kind.CONFLICT, "stale_version", f"If-Match expected {claim_id} at version {expected}, but {now}; read it again")
