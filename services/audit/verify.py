"""``claimlog verify``: the log has no gaps, every event reads, every claim's hash chain holds, every
event is signed by a key that may speak for its actor (services/log/signing.py), and the read models
equal a fresh replay; that replay names every repeat of an event id its actor had folded on its claim
(projections/repeats.py) and every event against the rules its claim's earlier events set (events/rules.py;
services/audit/rebuild.py).

Events stored before signatures were required are counted as unsigned, not reported as findings:
they were written before the registry signed anything.

The key registry's changes (events/key_registry.py) are facts of the log, on the registry's reserved
subject: chained like a claim's events, counted apart, never refused as claim events; the registry they
give must be the one the key registry's bucket holds, or the bucket was changed behind the log's back
(a ``registry`` finding).

The log is streamed page by page; what stays in memory is one 32-byte digest per claim (the hash its
next event must record) and at most ``MAX_KEPT`` findings (the rest are counted).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from events.key_registry import RegistryChange, RegistryChangeError, fold_registry
from events.subjects import DEFAULT_LAYOUT, REGISTRY, LogLayout
from services.admission import Admitted, Gate, Refused, RegistryFact
from services.identity.keys import KeyDocument, KeyRing, document_of, load_attribution
from services.log import ClaimLog, StoredEvent
from services.log.signing import Attribution

PAGE = 1000
MAX_KEPT = 1000


@dataclass(frozen=True)
class Finding:
    """One thing wrong, with where it is: sequence, subject and claim, or the table."""

    kind: str  # gap, unreadable, subject, chain, time, signature, repeat, rule, registry, table, read_models (unreadable to rule: refused by the gate)
    message: str
    seq: int | None = None
    subject: str | None = None
    claim_id: str | None = None
    table: str | None = None


@dataclass
class Report:
    """What verify looked at and what it found."""

    first_seq: int = 0
    last_seq: int = 0
    events: int = 0
    claims: int = 0
    log_seconds: float = 0.0
    tables_at_seq: int | None = None  # the sequence the read models were compared at; None when not compared
    tables_note: str | None = None
    unsigned: int = 0  # events stored before signatures were required, that carry none (not a finding)
    signed_after: int | None = None  # the sequence after which every event must be signed; None: not required
    registry_changes: int = 0  # the key registry's changes the log holds (not claim events)
    findings: list[Finding] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.counts

    def add(self, finding: Finding) -> None:
        self.counts[finding.kind] += 1
        if len(self.findings) < MAX_KEPT:
            self.findings.append(finding)

    def as_json(self) -> dict:
        kept = [{k: v for k, v in asdict(f).items() if v is not None} for f in self.findings]
        body = {k: v for k, v in asdict(self).items() if k not in ("findings", "counts")}
        return {"ok": self.ok, **body, "counts": dict(self.counts), "findings": kept}


class LogCheck:
    """Checks stored events fed in log order: sequence, decoding, subject and the claim's hash chain."""

    def __init__(self, report: Report, layout: LogLayout = DEFAULT_LAYOUT, attribution: Attribution | None = None) -> None:
        self._report, self._layout = report, layout
        self._gate = Gate(attribution)  # the same gate every reader admits through, checking every signature anew
        report.signed_after = self._gate.attribution.required_after
        self._next_seq = 1
        self._last_hash: dict[str, bytes] = {}
        self._last_time = None  # the previous event's store time: they never go backwards
        self.registry: list[RegistryChange] = []  # the key registry's changes, in log order

    def check(self, stored: StoredEvent) -> None:
        """Check one stored event (in log order)."""
        self._gap_before(stored.seq)
        self._report.events += 1
        subject, seq = stored.subject, stored.seq
        partition, claim_id, event_type = self._where(subject)
        previous = self._last_hash.get(claim_id)
        self._last_hash[claim_id] = hashlib.sha256(stored.data).digest()
        if self._last_time is not None and stored.stored_at < self._last_time:
            # Only a restored event carries its own store time (Claimlog-Stored-At, set by `claimlog
            # import` from the exported log, where times only grow): an earlier one was set by a client.
            self._report.add(Finding(
                "time",
                f"stored at {stored.stored_at.isoformat()}, before the event preceding it ({self._last_time.isoformat()}): "
                "a store time set by a client",
                seq, subject, claim_id,
            ))
        self._last_time = max(self._last_time or stored.stored_at, stored.stored_at)
        verdict = self._gate.stored(stored)
        event = verdict.event
        if isinstance(verdict, Refused):
            # Refused: no reader folds it, and it is here, kept by export and backup like any other.
            shown = f"{event.type} by {event.actor.id}: " if verdict.kind == "signature" and event is not None else ""
            self._report.add(Finding(verdict.kind, f"refused: {shown}{verdict.reason.removeprefix('not attributable: ')}", seq, subject, claim_id))
        elif isinstance(verdict, RegistryFact):
            self._report.registry_changes += 1
            self.registry.append(event)
            if partition != self._layout.partition_of(REGISTRY) or event_type != event.type:
                wanted = self._layout.stored_subject(REGISTRY, event.type)
                self._report.add(Finding("subject", f"a key-registry {event.type} is stored under {subject}, not {wanted}", seq, subject))
        elif partition != self._layout.partition_of(claim_id):
            wanted = self._layout.stored_subject(event.claim_id, event.type)
            self._report.add(
                Finding("subject", f"a {event.type} of {event.claim_id} is stored under {subject}, not {wanted}", seq, subject, claim_id)
            )
        if event is None:
            return
        expected = previous.hex() if previous is not None else None
        if event.prev_hash != expected:
            self._report.add(Finding("chain", _chain_break(event.prev_hash, expected), seq, subject, claim_id))
        if isinstance(verdict, Admitted) and verdict.signer is None:
            self._report.unsigned += 1

    def _where(self, subject: str) -> tuple[int | None, str, str]:
        """Partition, claim and type of a stored subject; a subject of another shape is kept whole as the
        claim (its event then fails the subject check, with the subject in the finding)."""
        try:
            return self._layout.parse(subject)
        except ValueError:
            return None, subject, ""

    def finish(self, last_seq: int) -> None:
        """Everything up to ``last_seq`` has been fed: a missing tail is a gap too."""
        self._gap_before(last_seq + 1)
        self._report.claims = len(self._last_hash) - (REGISTRY in self._last_hash)

    def compare_registry(self, cached: KeyDocument) -> None:
        """The key registry the log's changes give must be the one its bucket holds (``cached``)."""
        try:
            logged = document_of(fold_registry(self.registry))
        except RegistryChangeError as error:
            self._report.add(Finding("registry", f"the log's key-registry changes do not fold: {error}"))
            return
        if not self.registry and cached != KeyDocument():
            self._report.add(Finding("registry", "the key registry's bucket holds keys, and the log none of its changes: "
                                                 "start the registry once (`claimlog up` or the API) to record them"))
        elif logged != cached:
            self._report.add(Finding("registry", f"the key registry's bucket differs from what the log's changes give: {_differences(logged, cached)}"))

    def _gap_before(self, seq: int) -> None:
        if seq > self._next_seq:
            missing = f"{self._next_seq}" if seq - 1 == self._next_seq else f"{self._next_seq} to {seq - 1}"
            self._report.add(Finding("gap", f"sequence {missing} missing from the log", self._next_seq))
        self._next_seq = max(self._next_seq, seq + 1)


def _differences(logged: KeyDocument, cached: KeyDocument) -> str:
    """What the bucket holds that the log does not say, key by key, and the requirement."""
    said = {r.key_id: r for r in logged.keys}
    held = {r.key_id: r for r in cached.keys}
    parts = [f"key {k} of {held[k].actor.id} is in the bucket only" for k in held.keys() - said.keys()]
    parts += [f"key {k} of {said[k].actor.id} is in the log only" for k in said.keys() - held.keys()]
    parts += [f"key {k} of {held[k].actor.id} differs ({_fields(said[k], held[k])})" for k in said.keys() & held.keys() if said[k] != held[k]]
    if (logged.required_after, logged.required_set_at) != (cached.required_after, cached.required_set_at):
        parts.append(f"the bucket requires signatures after {cached.required_after}, the log after {logged.required_after}")
    return "; ".join(sorted(parts)) or "the order of its keys"


def _fields(said, held) -> str:
    return ", ".join(f"{name}: log {getattr(said, name)}, bucket {getattr(held, name)}"
                     for name in type(said).model_fields if getattr(said, name) != getattr(held, name))


def _chain_break(found: str | None, expected: str | None) -> str:
    if expected is None:
        return f"the claim's first event records prev_hash {found}, but there is no previous event"
    if found is None:
        return f"prev_hash is missing; the claim's previous stored event hashes to {expected}"
    return f"prev_hash {found} is not the hash of the claim's previous stored event ({expected})"


async def check_log(
    claim_log: ClaimLog, report: Report, *, head: int, progress: Callable[[int], None] | None = None
) -> None:
    """Stream the log from its first sequence through ``head`` into the checks, reading the next page meanwhile."""
    check = LogCheck(report, claim_log.layout, await load_attribution(claim_log.nc, stream=claim_log.stream))
    report.last_seq = head
    after = 0
    pending = asyncio.ensure_future(claim_log.read_log(after_seq=0, limit=PAGE)) if head else None
    while pending is not None:
        page = [stored for stored in await pending if stored.seq <= head]
        pending = None
        if page and page[-1].seq < head:
            pending = asyncio.ensure_future(claim_log.read_log(after_seq=page[-1].seq, limit=PAGE))
        if page and not report.first_seq:
            report.first_seq = page[0].seq
        for stored in page:
            check.check(stored)
        after = page[-1].seq if page else after
        if progress is not None:
            progress(after)
    check.finish(head)
    ring = await KeyRing.maybe_open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    check.compare_registry(KeyDocument() if ring is None else await ring.document())
