"""The checks of a fuzz run of the log (fuzz_run.py), each adding a problem that says what broke.

- the projector, folding while the log is written, reaches the log's head;
- exactly the events the contract does not fold are recorded unreadable, and nothing is parked;
- ``verify``'s log check names exactly those but the repeats and the events against the rules (unreadable,
  signature, subject), names every replay and wrong ``prev_hash`` as a chain break, and no valid event;
- the tables equal a clean replay (``verify``'s comparison, services/audit/rebuild.py), which names
  exactly the repeats and the events against the rules (events/rules.py: the workload's reviews by its
  service producer, a planned event a folding mutation got in before);
- the tables equal the projection of a second, fresh log holding only the events that fold, republished
  with their bytes, signatures and store times, sequences mapped from one log to the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, select

from events import Event
from events.rules import ClaimFacts, event_breach
from projections.registry import build_projections
from projections.tables import CONTROL_TABLES, checkpoints, metadata, parked_events, unreadable_events
from services.audit.rebuild import compare_read_models
from services.audit.verify import Finding, Report, check_log
from services.identity.keys import KeyRing
from services.log import ClaimLog, StoredEvent, StreamSpec, connect
from services.log.connection import RESTORED_TIME
from services.log.signing import Signer
from services.projector import Projector
from services.runtime.db import make_engine, upgrade
from services.runtime.embedded import EmbeddedNats
from tests.builders.fuzz_mutations import PRODUCER

STREAM = StreamSpec("CLAIMS")
CATCH_UP = 300.0  # seconds the projector may take to reach the head once everything is published
NAMED_UNREADABLE = ("unreadable", "signature", "subject", "time")  # refused by the gate (services/admission/)
SEQ_COLUMNS = ("seq", "first_seq", "last_seq")


@dataclass
class Published:
    """What the run published: each stored sequence's kind, which of them the contract lets fold."""

    kinds: dict[int, str] = field(default_factory=dict)
    folds: set[int] = field(default_factory=set)
    sent: Counter[str] = field(default_factory=Counter)
    deduplicated: Counter[str] = field(default_factory=Counter)
    repeats: set[int] = field(default_factory=set)  # attributable events stored again: recorded unreadable as repeats
    # Events that fold on their own but break a rule their claim's earlier folding events set (events/rules.py:
    # a mutation that folded took the next planned event's source id, say): recorded unreadable as such.
    rules: set[int] = field(default_factory=set)
    facts: dict[str, ClaimFacts] = field(default_factory=dict)  # each claim's, over its folding events

    def stored(self, seq: int, kind: str, *, folds: bool, event: Event | None = None) -> None:
        """A stored message, in log order; ``event``: what it holds, when it folds on its own."""
        self.kinds[seq] = kind
        if folds and event is not None:
            facts = self.facts.setdefault(event.claim_id, ClaimFacts(event.claim_id))
            if event_breach(facts, event) is not None:
                self.rules.add(seq)
                return
            facts.fold(event)
        if folds:
            self.folds.add(seq)


class Problems(list[str]):
    """What a run found wrong, one sentence each."""


class FullReport(Report):
    """A verify report that keeps every finding (a fuzz run makes more than verify keeps to show)."""

    def add(self, finding: Finding) -> None:
        self.counts[finding.kind] += 1
        self.findings.append(finding)


def migrated_sqlite(path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    return engine


@dataclass
class LiveProjection:
    """The projector folding the fuzzed log while it is written."""

    engine: Engine
    projector: Projector
    task: asyncio.Task
    problems: Problems

    async def finish(self, admin: ClaimLog, head: int, published: Published) -> set[int]:
        """Wait for the projector to reach ``head``, check what it folded; returns the sequences recorded unreadable."""
        async with asyncio.timeout(CATCH_UP):
            while self.projector.checkpoint < head and not self.task.done():
                await asyncio.sleep(0.02)
        if self.projector.checkpoint < head:
            failure = self.task.exception() if self.task.done() else None
            self.problems.append(f"the projector stopped at {self.projector.checkpoint} of {head}: {failure!r}")
        with self.engine.connect() as conn:
            unreadable = set(conn.execute(select(unreadable_events.c.seq)).scalars())
            parked = list(conn.execute(select(parked_events.c.seq, parked_events.c.reason)))
        expected = set(published.kinds) - published.folds
        _differ(self.problems, "recorded unreadable", unreadable, expected, published)
        if parked:
            self.problems.append(f"{len(parked)} events parked, first {parked[0].seq}: {parked[0].reason}")
        await _check_verify(admin, self.engine, head, published, expected, self.problems)
        return unreadable


@contextlib.asynccontextmanager
async def check_projection(projector_url: str, engine: Engine, problems: Problems) -> AsyncIterator[LiveProjection]:
    """A projector with the projector role's credential, folding into ``engine`` from the first event on."""
    nc = await connect(projector_url)
    projector = Projector(ClaimLog(nc, STREAM), engine, build_projections(), name="projector", batch=50)
    stop = asyncio.Event()
    task = asyncio.create_task(projector.run(stop))
    try:
        yield LiveProjection(engine, projector, task, problems)
    finally:
        stop.set()
        await asyncio.wait([task])
        await nc.close()


async def _check_verify(admin: ClaimLog, engine: Engine, head: int, published: Published, expected: set[int], problems: Problems) -> None:
    report = FullReport()
    await check_log(admin, report, head=head)
    named: defaultdict[str, set[int]] = defaultdict(set)
    for finding in report.findings:
        named[finding.kind].add(finding.seq)
    _differ(
        problems, "named unreadable by verify", set().union(*(named[k] for k in NAMED_UNREADABLE)),
        expected - published.repeats - published.rules, published,
    )
    if others := set(named) - {*NAMED_UNREADABLE, "chain"}:
        problems.append(f"verify found {sorted(others)}: {[f.message for f in report.findings if f.kind in others][:3]}")
    if valid := sorted(seq for seq in named["chain"] if published.kinds.get(seq) in ("valid", "legacy")):
        problems.append(f"verify names valid events as chain breaks: {valid[:10]}")
    unchained = ("replay", "duplicate", "wrong_prev_hash")
    if missed := sorted(s for s, kind in published.kinds.items() if kind in unchained and s not in named["chain"]):
        problems.append(f"verify does not name these replays or wrong previous hashes: {missed[:10]}")
    tables = FullReport()
    await compare_read_models(admin, engine, tables)
    repeats = {finding.seq for finding in tables.findings if finding.kind == "repeat"}
    _differ(problems, "named as repeats by verify", repeats, published.repeats, published)
    rules = {finding.seq for finding in tables.findings if finding.kind == "rule"}
    _differ(problems, "named as against the rules by verify", rules, published.rules, published)
    problems.extend(f"against a clean replay: {finding.message}" for finding in tables.findings if finding.kind not in ("repeat", "rule"))


def _differ(problems: Problems, what: str, found: set[int], expected: set[int], published: Published) -> None:
    if found != expected:
        extra, missing = sorted(found - expected)[:10], sorted(expected - found)[:10]
        problems.append(
            f"{what}: {[(s, published.kinds.get(s)) for s in extra]} should not be, {[(s, published.kinds.get(s)) for s in missing]} should"
        )


async def check_clean_log(
    admin: ClaimLog, engine: Engine, signer: Signer, published: Published, workdir: Path, problems: Problems,
    *, then: Callable[[ClaimLog, dict[int, int]], Awaitable[None]] | None = None,
) -> None:
    """Publish the events that fold into a fresh log, project it, and compare its tables with ``engine``'s;
    ``then``: more checks against that log (and each folding event's sequence there) while it runs."""
    with EmbeddedNats(workdir / "clean-nats") as server:
        clean = ClaimLog(await connect(server.url_for("admin")), STREAM)
        clean_engine = migrated_sqlite(workdir / "clean.sqlite3")
        try:
            await clean.ensure()
            seqs = await _republish(admin, clean, signer, published)
            await Projector(clean, clean_engine, build_projections(), name="projector", batch=50).run_until(await clean.head())
            with engine.connect() as live, clean_engine.connect() as fresh:
                if leftover := list(fresh.execute(select(unreadable_events.c.seq, unreadable_events.c.reason))):
                    problems.append(f"the log of folding events alone has unreadable events: {leftover[:3]}")
                _compare(problems, normalized(live, lambda seq: seqs.get(seq, f"unmapped {seq}")), normalized(fresh, lambda seq: seq))
            if then is not None:
                await then(clean, seqs)
        finally:
            clean_engine.dispose()
            await clean.nc.close()


async def _republish(admin: ClaimLog, clean: ClaimLog, signer: Signer, published: Published) -> dict[int, int]:
    """The folding events of ``admin``'s log into ``clean`` in order; returns each one's sequence there."""
    ring = await KeyRing.open(clean.nc, stream=STREAM.name)
    await ring.add(PRODUCER, signer=signer)
    seqs: dict[int, int] = {}
    required = False
    async for stored in _stored(admin):
        if stored.seq not in published.folds:
            continue
        if not required and published.kinds[stored.seq] != "legacy":  # the legacy events come first
            await ring.require(await clean.head())
            required = True
        claim_id, event_type = stored.subject.split(".")[-2:]
        headers = {RESTORED_TIME: stored.stored_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), **(stored.signature or {})}
        seqs[stored.seq] = (await clean.nc.jetstream().publish(clean.layout.publish_subject(claim_id, event_type), stored.data, headers=headers)).seq
    return seqs


async def _stored(claim_log: ClaimLog) -> AsyncIterator[StoredEvent]:
    after, head = 0, await claim_log.head()
    while after < head:
        page = await claim_log.read_log(after_seq=after, limit=1000)
        for stored in page:
            yield stored
        after = page[-1].seq


def normalized(conn: Connection, renumber: Callable[[int], Any]) -> dict[str, list[tuple]]:
    """Every read-model row with its log sequences renumbered (columns, and sequences in page documents)."""
    tables = {}
    for table in metadata.sorted_tables:
        if table.name in CONTROL_TABLES or table in (checkpoints, unreadable_events):
            continue
        columns = [c for c in table.columns if c.info.get("checksum", True)]
        rows = []
        for row in conn.execute(select(*columns)):
            rows.append(tuple(
                renumber(value) if column.name in SEQ_COLUMNS
                else json.dumps(_renumbered(json.loads(value), renumber), sort_keys=True) if column.name == "doc"
                else value
                for column, value in zip(columns, row, strict=True)
            ))
        tables[table.name] = sorted(rows, key=repr)
    return tables


def _renumbered(doc: Any, renumber: Callable[[int], Any]) -> Any:
    if isinstance(doc, dict):
        return {k: renumber(v) if (k == "seq" or k.endswith("_seq")) and isinstance(v, int) else _renumbered(v, renumber) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_renumbered(v, renumber) for v in doc]
    return doc


def _compare(problems: Problems, live: dict[str, list[tuple]], fresh: dict[str, list[tuple]]) -> None:
    for table in sorted(live):
        if live[table] != fresh[table]:
            extra = [row for row in live[table] if row not in fresh[table]]
            missing = [row for row in fresh[table] if row not in live[table]]
            problems.append(
                f"{table} differs from the projection of the folding events alone: {len(extra)} rows only in the fuzzed log's "
                f"(first {str(extra[:1])[:300]}), {len(missing)} only in the other's (first {str(missing[:1])[:300]})"
            )
