"""The fuzz run of the log (bench/fuzz_log.py prints it; tests/integration/test_fuzz_log.py runs a small one):
a direct producer's signed events and mutations of them (fuzz_mutations.py) published on a fresh embedded
nats-server while a projector folds the log, then the log's promises checked (fuzz_checks.py)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from events import Event, decode
from services.identity.keys import KeyRing
from services.log import ClaimLog, StreamSpec, connect
from services.log.signing import Signer
from services.runtime.embedded import EmbeddedNats
from tests.builders.fuzz_checks import Problems, Published, check_clean_log, check_projection, migrated_sqlite
from tests.builders.fuzz_headers import HEADER_KINDS, Taken, craft_headers
from tests.builders.fuzz_mutations import API, KINDS, PRODUCER, craft
from tests.builders.fuzz_readers import check_export_import, check_readers
from tests.builders.workload import claim_events

STREAM = StreamSpec("CLAIMS")
LEGACY_CLAIMS = 2  # claims whose draft is stored unsigned, before signatures are required


@dataclass
class Outcome:
    """The run's counts and every check that failed (none: the log held)."""

    published: Published
    head: int
    unreadable: set[int]
    problems: list[str]
    seconds: float


class Producer:
    """The direct producer: valid signed appends of planned claims, and mutations published raw."""

    def __init__(self, log: ClaimLog, signer: Signer, delegate: Signer, rng: random.Random, *, events: int, published: Published) -> None:
        self.log, self.signer, self.delegate, self.rng, self.published = log, signer, delegate, rng, published
        count = max(4, min(40, events // 25))
        per_claim = max(4, events // count)  # more than the run uses: there is always a next valid event
        self.plans = {f"CLM-{n:07d}": [e.model_copy(update={"actor": PRODUCER}) for e in claim_events(n, per_claim, rng)] for n in range(count)}
        self.done: dict[str, list[int]] = {claim: [] for claim in self.plans}

    async def legacy(self) -> None:
        """The first claims' drafts, stored unsigned before the registry required signatures."""
        unsigned = ClaimLog(self.log.nc, self.log.spec)
        for claim in list(self.plans)[:LEGACY_CLAIMS]:
            draft = self.plans[claim].pop(0)
            appended = await unsigned.append(claim, [draft], expected_seq=0, prev_hash=None)
            self.published.stored(appended.last_seq, "legacy", folds=True, event=draft)
            self.done[claim].append(appended.last_seq)
            self.published.sent["legacy"] += 1

    async def valid(self) -> int:
        """Append the next one to three planned events of a claim, signed once; returns how many."""
        claim = self.rng.choice([c for c, plan in self.plans.items() if plan])
        events = [self.plans[claim].pop(0) for _ in range(min(self.rng.randint(1, 3), len(self.plans[claim])))]
        head = await self.log.claim_head(claim)
        appended = await self.log.append(claim, events, expected_seq=head.seq, prev_hash=head.hash)
        for seq, event in zip(range(appended.first_seq, appended.last_seq + 1), events, strict=True):
            self.published.stored(seq, "valid", folds=True, event=event)
            self.done[claim].append(seq)
        self.published.sent["valid"] += len(events)
        return len(events)

    async def mutation(self) -> None:
        """Publish one mutation of a claim's next event (or republish one of its stored events)."""
        kind = self.rng.choice(KINDS)
        claim = self.rng.choice([c for c, seqs in self.done.items() if seqs and self.plans[c]])
        self.published.sent[kind] += 1
        if kind in ("replay", "duplicate"):
            await self._republish(kind, claim)
            return
        head = await self.log.claim_head(claim)
        other = self.rng.choice([c for c in self.plans if c != claim])
        # The claim's next event under an id of its own: a mutation that folds would otherwise take the id
        # of the valid event appended later, which would then be a repeat (projections/repeats.py).
        # (Derived from the count of messages sent, so that the run's random choices stay those of its seed.)
        fresh_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fuzz/{claim}/{self.published.sent.total()}"))
        event: Event = self.plans[claim][0].model_copy(update={"event_id": fresh_id})
        crafted = craft(kind, event, head_hash=head.hash, other_claim=other, signer=self.signer, delegate=self.delegate, rng=self.rng)
        ack = await self.log.nc.jetstream().publish(crafted.subject, crafted.data, headers=crafted.headers)
        self.published.stored(ack.seq, kind, folds=crafted.folds, event=decode(crafted.data) if crafted.folds else None)

    async def header_mutation(self) -> None:
        """Publish a claim's next event, signed, with one header mutated (tests/builders/fuzz_headers.py)."""
        kind = self.rng.choice(HEADER_KINDS)
        claim = self.rng.choice([c for c, seqs in self.done.items() if seqs and self.plans[c]])
        self.published.sent[kind] += 1
        head = await self.log.claim_head(claim)
        fresh_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fuzz/{claim}/{self.published.sent.total()}"))
        event: Event = self.plans[claim][0].model_copy(update={"event_id": fresh_id})
        earlier = self.rng.choice(self.done[claim])
        taken = Taken((await self.log.read_claim(claim, after_seq=earlier - 1, up_to_seq=earlier))[0].msg_id)
        crafted = craft_headers(kind, event, head_hash=head.hash, signer=self.signer, delegate=self.delegate, rng=self.rng, taken=taken)
        ack = await self.log.nc.jetstream().publish(crafted.subject, crafted.data, headers=crafted.headers)
        if ack.duplicate:
            self.published.deduplicated[kind] += 1
            return
        self.published.stored(ack.seq, kind, folds=crafted.folds, event=decode(crafted.data) if crafted.folds else None)

    async def _republish(self, kind: str, claim: str) -> None:
        """A stored valid event again, with its signature: a replay (no message id) or a duplicate (its own)."""
        seq = self.rng.choice([s for s in self.done[claim] if self.published.kinds[s] == "valid"] or self.done[claim])
        stored = (await self.log.read_claim(claim, after_seq=seq - 1, up_to_seq=seq))[0]
        headers = dict(stored.signature or {})
        if kind == "duplicate" and stored.msg_id:
            headers["Nats-Msg-Id"] = stored.msg_id
        claim_id, event_type = stored.subject.split(".")[-2:]
        ack = await self.log.nc.jetstream().publish(self.log.layout.publish_subject(claim_id, event_type), stored.data, headers=headers or None)
        if ack.duplicate:
            self.published.deduplicated[kind] += 1
        elif seq in self.published.rules and stored.signature is not None:
            # The rules refused the event it copies, which took no id: it is judged afresh, as any event.
            self.published.stored(ack.seq, kind, folds=True, event=decode(stored.data))
        else:  # an event id its actor folded on its claim: a repeat (an unsigned one stored before the requirement is,
            # stored again after it, unsigned too late, and unattributable before that)
            self.published.stored(ack.seq, kind, folds=False)
            if stored.signature is not None:
                self.published.repeats.add(ack.seq)


async def fuzz(events: int, seed: int, workdir: Path, *, sync: str = "always", on_sent: Callable[[int], None] | None = None) -> Outcome:
    """Publish about ``events`` events and mutations on a fresh embedded nats-server, fold them live,
    and check the log's promises (tests/builders/fuzz_checks.py); ``on_sent`` hears the count sent so far."""
    started = time.perf_counter()
    rng, published, problems = random.Random(seed), Published(), Problems()
    engine = migrated_sqlite(workdir / "live.sqlite3")
    with EmbeddedNats(workdir / "nats", sync=sync) as server:
        admin = ClaimLog(await connect(server.url_for("admin")), STREAM)
        writer = await connect(server.url_for("writer"))
        try:
            await admin.ensure()
            ring = await KeyRing.open(admin.nc, stream=STREAM.name)
            signer, _ = await ring.add(PRODUCER)
            delegate, _ = await ring.add(API, delegate=True)
            producer = Producer(ClaimLog(writer, STREAM, signer=signer), signer, delegate, rng, events=events, published=published)
            await producer.legacy()
            await ring.require(await admin.head())
            async with check_projection(server.url_for("projector"), engine, problems) as projection:
                await _publish(producer, events, on_sent)
                await producer.valid()  # the log ends with a valid event: the projector must get past everything
                head = await admin.head()
                unreadable = await projection.finish(admin, head, published)
            await check_every_reader(admin, engine, signer, published, workdir, problems, rng)
        finally:
            await writer.close()
            await admin.nc.close()
            engine.dispose()
    return Outcome(published, head, unreadable, list(problems), time.perf_counter() - started)


async def check_every_reader(
    admin: ClaimLog, engine: Engine, signer: Signer, published: Published, workdir: Path, problems: Problems, rng: random.Random
) -> None:
    """The live tables, then every other reader of the log (tests/builders/fuzz_readers.py), against the log
    of the admitted events alone; an export imported, judged again."""

    async def readers(clean: ClaimLog, seqs: dict[int, int]) -> None:
        await check_readers(admin, clean, seqs, problems, rng=rng)

    await check_clean_log(admin, engine, signer, published, workdir, problems, then=readers)
    await check_export_import(admin, workdir, problems)


async def _publish(producer: Producer, events: int, on_sent: Callable[[int], None] | None) -> None:
    """Valid appends and mutations, about half each, each count sent told to ``on_sent``."""
    sent = 0
    while sent < events:
        draw = producer.rng.random()
        if draw < 0.5:
            sent += await producer.valid()
        else:
            await (producer.mutation() if draw < 0.8 else producer.header_mutation())
            sent += 1
        if on_sent is not None:
            on_sent(sent)
