"""One stored message, admitted or refused with the reason: the checks that need nothing but the message
itself and the key registry (``Attribution``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from events import Event, UnknownEventError, decode
from events.key_registry import RegistryChange, RegistryChangeError, decode_change
from events.subjects import claim_and_type, is_registry_subject
from services.log.signing import PROOF, SIGNATURE, SIGNER, Attribution, SigningKey


@dataclass(frozen=True, slots=True)
class Admitted:
    """A message every reader folds: its event, where the log holds it, and who vouched for it."""

    seq: int
    subject: str
    stored_at: datetime
    event: Event
    signer: SigningKey | None = None  # None: unsigned, where the registry still allows it


@dataclass(frozen=True, slots=True)
class Refused:
    """A message no reader folds: where the log holds it and why. ``event`` is what its body claims, when
    it decodes: never an act of the actor it names."""

    seq: int
    subject: str
    stored_at: datetime
    reason: str
    event: Event | None = None
    kind: str = "unreadable"  # what refused it: time, unreadable, subject, signature, repeat, rule

    @property
    def type(self) -> str:
        """The event type its subject names (its body may name another, or none)."""
        return claim_and_type(self.subject)[1]


@dataclass(frozen=True, slots=True)
class RegistryFact:
    """A change of the key registry (events/key_registry.py), stored on the registry's reserved subject: a
    fact of the registry, not a claim's event, so no projection folds it and no reader counts it refused."""

    seq: int
    subject: str
    stored_at: datetime
    event: RegistryChange  # named as a claim event's is, so a reader of the chain reads its prev_hash alike


Verdict = Admitted | Refused | RegistryFact


class Gate:
    """Judges stored messages against one reading of the key registry (keys and the signing requirement).

    With ``remember``, it keeps which messages (sequence, bytes and signature headers) it found
    attributable (at most that many, the newest), so a process reading a message again (an as-of page, a claim's state, a history) checks its
    Ed25519 signature once, not once per read: a log's message at a sequence never changes, and the
    verdict holds for as long as this reading of the registry does (``keys.py`` keeps a gate while the
    registry is unchanged and makes a new one when it changes). Refusals are not kept: they are few."""

    def __init__(self, attribution: Attribution | None = None, *, remember: int = 0) -> None:
        self.attribution = attribution or Attribution({}, None)
        self._remember = remember
        self._attributed: dict[int, SigningKey | None] = {}  # message -> the key that vouched for it (insertion order: oldest first)

    def judge(
        self, seq: int, subject: str, data: bytes, headers: Mapping[str, str] | None, stored_at: datetime, time_problem: str | None = None
    ) -> Verdict:
        """The verdict on one stored message. Never raises: whatever a publisher sent is a reason, at worst."""
        if is_registry_subject(subject):
            return _registry_fact(seq, subject, data, stored_at, time_problem)
        if time_problem is not None:
            return Refused(seq, subject, stored_at, time_problem, _decoded_or_none(data), "time")
        try:
            event = decode(data)
        except UnknownEventError as error:
            return Refused(seq, subject, stored_at, str(error))
        named, named_type = claim_and_type(subject)
        if named != event.claim_id or named_type != event.type:
            why = f"its subject {subject} names a {named_type} of {named}, its body a {event.type} of {event.claim_id}"
            return Refused(seq, subject, stored_at, why, event, "subject")
        # What it is remembered by: the message, not its sequence alone (a stream made again under the same
        # connection, a restore, holds other messages at the same sequences).
        seen = hash((seq, data, _signature_of(headers))) if self._remember else None
        if seen is not None and seen in self._attributed:
            return Admitted(seq, subject, stored_at, event, self._attributed[seen])
        try:
            signer = self.attribution.check(seq, headers, data, stored_at, event.actor.id)
        except ValueError as error:
            return Refused(seq, subject, stored_at, f"not attributable: {error}", event, "signature")
        if seen is not None:
            if len(self._attributed) >= self._remember:
                del self._attributed[next(iter(self._attributed))]
            self._attributed[seen] = signer
        return Admitted(seq, subject, stored_at, event, signer)

    def stored(self, stored) -> Verdict:
        """The verdict on a ``StoredEvent`` (services/log/reader.py) as a claim read returns it."""
        return self.judge(stored.seq, stored.subject, stored.data, stored.signature, stored.stored_at, stored.time_problem)

    def delivered(self, delivery) -> Verdict:
        """The verdict on a consumer's ``Delivery`` (or a rebuild worker's fed one)."""
        stored_at, problem = delivery.store_time()
        return self.judge(delivery.seq, delivery.subject, delivery.data, delivery.headers, stored_at, problem)


def _registry_fact(seq: int, subject: str, data: bytes, stored_at: datetime, time_problem: str | None) -> Verdict:
    """A registry change as a fact, or refused (``registry``) when its bytes or store time are not one."""
    if time_problem is not None:
        return Refused(seq, subject, stored_at, f"a key-registry change whose store time is not one: {time_problem}", kind="registry")
    try:
        return RegistryFact(seq, subject, stored_at, decode_change(data))
    except RegistryChangeError as error:
        return Refused(seq, subject, stored_at, f"not a key-registry change: {error}", kind="registry")


def _signature_of(headers: Mapping[str, str] | None) -> tuple | None:
    if not headers:
        return None
    return (headers.get(SIGNER), headers.get(SIGNATURE), headers.get(PROOF))


def _decoded_or_none(data: bytes) -> Event | None:
    try:
        return decode(data)
    except UnknownEventError:
        return None
