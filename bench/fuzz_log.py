"""An end-to-end fuzz run of the log: a direct producer's signed events and mutations of them, folded live.

    python bench/fuzz_log.py [--events 5000] [--seed 1]

A direct producer (its own Ed25519 key in the key registry, the writer's NATS credential) appends the
events of a few dozen claims with the project's signed append, after a few unsigned events stored before
`claimlog actors key require`. Between them it publishes mutations (bench/fuzz_mutations.py): unsigned,
mis-signed, signed for another actor, subject and body naming other claims, truncated and garbage bytes,
wrong types, unknown types, huge fields, wrong ``prev_hash``, replays and duplicates. A projector folds the
log while it is written. The run then checks that the projector reached the log's head, that exactly the
unattributable or unreadable events and the repeats of folded ones are recorded unreadable, that ``verify``
names exactly those and the chain breaks, that the tables equal a clean replay, and that they equal the projection of a second log
holding only the events that fold (same bytes, signatures and store times; sequences mapped).
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments, progress  # noqa: E402
from bench.fuzz_checks import Problems, Published, check_clean_log, check_projection, migrated_sqlite  # noqa: E402
from bench.fuzz_mutations import API, KINDS, PRODUCER, craft  # noqa: E402
from bench.workload import claim_events  # noqa: E402
from events import Event  # noqa: E402
from services.keys import KeyRing  # noqa: E402
from services.log import ClaimLog, StreamSpec, connect  # noqa: E402
from services.log.signing import Signer  # noqa: E402
from services.runtime.embedded import EmbeddedNats  # noqa: E402

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
            appended = await unsigned.append(claim, [self.plans[claim].pop(0)], expected_seq=0, prev_hash=None)
            self.published.stored(appended.last_seq, "legacy", folds=True)
            self.done[claim].append(appended.last_seq)
            self.published.sent["legacy"] += 1

    async def valid(self) -> int:
        """Append the next one to three planned events of a claim, signed once; returns how many."""
        claim = self.rng.choice([c for c, plan in self.plans.items() if plan])
        events = [self.plans[claim].pop(0) for _ in range(min(self.rng.randint(1, 3), len(self.plans[claim])))]
        head = await self.log.claim_head(claim)
        appended = await self.log.append(claim, events, expected_seq=head.seq, prev_hash=head.hash)
        for seq in range(appended.first_seq, appended.last_seq + 1):
            self.published.stored(seq, "valid", folds=True)
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
        self.published.stored(ack.seq, kind, folds=crafted.folds)

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
        else:  # an event id its claim folded: a repeat (an unsigned one stored before the requirement is,
            # stored again after it, unsigned too late, and unattributable before that)
            self.published.stored(ack.seq, kind, folds=False)
            if stored.signature is not None:
                self.published.repeats.add(ack.seq)


async def fuzz(events: int, seed: int, workdir: Path, *, sync: str = "always", show_progress: bool = False) -> Outcome:
    """Publish about ``events`` events and mutations on a fresh embedded nats-server, fold them live,
    and check the log's promises (bench/fuzz_checks.py)."""
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
                await _publish(producer, events, show_progress)
                await producer.valid()  # the log ends with a valid event: the projector must get past everything
                head = await admin.head()
                unreadable = await projection.finish(admin, head, published)
            await check_clean_log(admin, engine, signer, published, workdir, problems)
        finally:
            await writer.close()
            await admin.nc.close()
            engine.dispose()
    return Outcome(published, head, unreadable, list(problems), time.perf_counter() - started)


async def _publish(producer: Producer, events: int, show_progress: bool) -> None:
    """Valid appends and mutations, about half each, with a progress bar when asked."""
    sent = 0
    with progress() as bar:
        task = bar.add_task("publish", total=events, rate="", visible=show_progress)
        while sent < events:
            sent += await producer.valid() if producer.rng.random() < 0.5 else (await producer.mutation() or 1)
            speed = bar.tasks[0].speed
            bar.update(task, completed=sent, rate=f"{speed:,.0f} messages/s" if speed else "")


def summary(outcome: Outcome) -> Table:
    """Per kind: messages sent, stored, deduplicated by the server, and recorded unreadable."""
    published = outcome.published
    table = Table(title=f"fuzz run: log head {outcome.head}, {outcome.seconds:.1f} s")
    for column in ("kind", "sent", "stored", "deduplicated", "unreadable", "folded"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in ("legacy", "valid", *KINDS):
        seqs = [seq for seq, k in published.kinds.items() if k == kind]
        unreadable = sum(seq in outcome.unreadable for seq in seqs)
        table.add_row(kind, str(published.sent[kind]), str(len(seqs)), str(published.deduplicated[kind]), str(unreadable), str(len(seqs) - unreadable))
    return table


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=5000, help="messages to publish, valid and mutated (default 5000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run's choices (default 1)")
    options = parser.parse_args()
    logging.disable(logging.ERROR)  # the projector logs every unreadable event: the summary counts them
    console = Console()
    with tempfile.TemporaryDirectory(prefix="claimlog-fuzz-") as folder:
        outcome = asyncio.run(fuzz(options.events, options.seed, Path(folder), sync=options.sync, show_progress=True))
    console.print(summary(outcome))
    for problem in outcome.problems:
        console.print(f"[red]✗ {problem}")
    if not outcome.problems:
        console.print("[green]✓ the projector reached the head; exactly the bad events are unreadable and named by verify; "
                      "the tables equal a clean replay and a projection of the valid events alone")
    return 1 if outcome.problems else 0


if __name__ == "__main__":
    sys.exit(main())
