"""Property: a log of many claims with events that name other claims (relations, supersessions) and
every kind of change (sources, disagreements, reviews, revisions), folded by 1, 2 and 4 owners of its
partitions committing at once from their own threads, in batches of random sizes, with one partition's
runner killed mid-way and the partition taken by another owner at a higher epoch, gives the tables of a
clean single-process replay; and every view across claims (scorecard, counts per capability, listing,
search, contributors, batch counts) answers the same. Seeded random logs, on a real nats-server, SQLite
and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import httpx
import pytest
from sqlalchemy import Engine

from events import Actor, Event
from events.claim import ClaimSuperseded
from events.relation import ClaimsRelated
from events.subjects import LogLayout
from projections.checksum import table_checksums
from projections.registry import build_projections
from services.http.app import create_app
from services.log import ClaimLog, StreamSpec, connect
from services.projector import FencingError, Projector, Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.read_api import queries
from services.rebuild.parallel_worker import clear_place
from tests.builders import (
    _envelope,
    answered,
    attached,
    corrected,
    drafted,
    filed,
    resolved,
    retracted,
    review_withdrawn,
    reviewed,
    revised,
    withdrawn,
)
from tests.conftest import random_claim_id

SEEDS = (2812, 7)
CLAIMS, STEPS = 28, 260
CAPABILITIES = ("Planning a sequence of actions before acting", "Using a calculator tool", "Reading tables")
ACTORS = (
    Actor(id="ada", kind="person"),
    Actor(id="bo", kind="person"),
    Actor(id="drafter", kind="model", model="test-model-1"),
    Actor(id="judge", kind="model", model="judge-2"),
    Actor(id="source-bot", kind="service"),
)
RELATIONS = ("validates", "supports", "contradicts", "qualifies", "mentions")


@dataclass
class Claim:
    claim_id: str
    sources: set[str] = field(default_factory=set)
    open_disagreements: set[str] = field(default_factory=set)
    reviews: set[str] = field(default_factory=set)
    related: set[str] = field(default_factory=set)
    closed: bool = False
    made: int = 0

    def next_id(self, prefix: str) -> str:
        self.made += 1
        return f"{prefix}{self.made}"


def generate(rng: random.Random) -> list[tuple[str, list[Event]]]:
    """Appends in log order: each claim's draft, then changes to claims picked at random, 1-3 events each."""
    claims = [Claim(random_claim_id()) for _ in range(CLAIMS)]
    appends: list[tuple[str, list[Event]]] = []
    for claim in claims:
        actor = rng.choice(ACTORS)
        appends.append((claim.claim_id, [drafted(claim.claim_id, actor, capability=rng.choice(CAPABILITIES), technique=rng.choice((None, "chain of thought")))]))
    for _ in range(STEPS):
        claim = rng.choice([c for c in claims if not c.closed])
        appends.append((claim.claim_id, [change(rng, claim, claims) for _ in range(rng.randint(1, 3)) if not claim.closed]))
    return [(claim_id, events) for claim_id, events in appends if events]


def change(rng: random.Random, claim: Claim, claims: list[Claim]) -> Event:
    """One change the claim's state allows (the projection would park one it does not)."""
    cid, who = claim.claim_id, rng.choice(ACTORS)
    others = [c.claim_id for c in claims if c.claim_id != cid and c.claim_id not in claim.related]
    choices = ["attach"] * 5 + ["file"] * 2 + ["review"] * 2 + ["relate"] * 2 + ["revise"]
    choices += ["correct", "withdraw"] * bool(claim.sources) + ["answer", "resolve"] * bool(claim.open_disagreements)
    choices += ["unreview"] * bool(claim.reviews) + ["retract", "supersede"] * (rng.random() < 0.08)
    match rng.choice(choices):
        case "attach":
            source = claim.next_id("s")
            claim.sources.add(source)
            return attached(cid, source, rng.choice(RELATIONS), who)
        case "correct":
            return corrected(cid, rng.choice(sorted(claim.sources)), who)
        case "withdraw":
            source = rng.choice(sorted(claim.sources))
            claim.sources.discard(source)
            return withdrawn(cid, source, who)
        case "file":
            disagreement = claim.next_id("d")
            claim.open_disagreements.add(disagreement)
            return filed(cid, disagreement, who)
        case "answer":
            return answered(cid, rng.choice(sorted(claim.open_disagreements)), who)
        case "resolve":
            disagreement = rng.choice(sorted(claim.open_disagreements))
            claim.open_disagreements.discard(disagreement)
            return resolved(cid, disagreement, rng.choice(("upheld", "rejected", "withdrawn")), who)
        case "review":
            review = claim.next_id("r")
            claim.reviews.add(review)
            return reviewed(cid, review, rng.choice(("person", "ai")), who, verdict=rng.choice(("sound", "unsound", "inconclusive")))
        case "unreview":
            review = rng.choice(sorted(claim.reviews))
            claim.reviews.discard(review)
            return review_withdrawn(cid, review, who)
        case "relate" if others:
            other = rng.choice(others)
            claim.related.add(other)
            return ClaimsRelated(**_envelope(cid, who, {"related_claim_id": other, "rank": len(claim.related)}))
        case "retract":
            claim.closed = True
            return retracted(cid, who)
        case "supersede" if others:
            claim.closed = True
            return ClaimSuperseded(**_envelope(cid, who, {"superseded_by": rng.choice(others), "reason": "A newer claim."}))
    return revised(cid, who, statement=f"Statement {rng.randrange(10**6)} of {cid}, sharper.")


@dataclass
class Plan:
    """Who folds what: ``n`` owners, partition k to owner k % n, one ``victim`` partition killed at ``mid``."""

    owners: int
    lasts: dict[int, int]  # partition -> its last event's sequence (partitions with events only)
    victim: int
    mid: int
    batches: dict[int, int]  # partition -> batch size
    stopped: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)


async def owner(nats_url: str, stream: StreamSpec, engine: Engine, plan: Plan, me: int) -> None:
    """One owner: a runner per partition it holds, all at once; the victim's killed mid-way, and, for the
    owner after it, the victim's partition taken at a higher epoch once it is dead."""
    nc = await connect(nats_url)
    claim_log = ClaimLog(nc, stream)
    layout = claim_log.layout

    def runner(k: int, epoch: int) -> Runner:
        writer = CheckpointedWriter(engine, build_projections(), partitions=layout.partitions)
        return Runner(claim_log, writer, name=f"n{plan.owners}-o{me}-p{k}-e{epoch}", batch=plan.batches[k], scope=Scope(partition=k), epoch=epoch)

    async def kill_mid_way() -> None:
        victim = runner(plan.victim, 1)
        stop = asyncio.Event()
        task = asyncio.create_task(victim.run(stop))
        while victim.checkpoint < plan.mid:
            assert not task.done(), task.result()
            await asyncio.sleep(0.001)
        while not task.done():  # no graceful stop: whatever it was doing is cut off (again, should a
            task.cancel()  # wait_for of Python 3.11 swallow the cancellation)
            await asyncio.wait([task], timeout=0.05)
        assert task.cancelled(), task.result()
        plan.stopped.set()

    async def take_over() -> None:
        await asyncio.to_thread(plan.stopped.wait, 60)
        await runner(plan.victim, 2).run_until(plan.lasts[plan.victim])
        with pytest.raises(FencingError, match="owned at epoch 2, above 1"):
            runner(plan.victim, 1).load_checkpoint()  # the killed owner, back: refused

    jobs = [runner(k, 1).run_until(last) for k, last in plan.lasts.items() if k % plan.owners == me and k != plan.victim]
    if plan.victim % plan.owners == me:
        jobs.append(kill_mid_way())
    if (plan.victim + 1) % plan.owners == me:
        jobs.append(take_over())
    try:
        await asyncio.gather(*jobs)
    finally:
        await nc.close()


def fold_by_owners(nats_url: str, claim_log: ClaimLog, engine: Engine, plan: Plan) -> None:
    """Run each owner in a thread of its own (its own event loop and connection): their commits overlap."""

    def run(me: int) -> None:
        try:
            asyncio.run(owner(nats_url, claim_log.spec, engine, plan, me))
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            plan.errors.append(error)
            plan.stopped.set()

    threads = [threading.Thread(target=run, args=(me,), name=f"owner-{me}") for me in range(plan.owners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert not any(thread.is_alive() for thread in threads)
    if plan.errors:
        raise plan.errors[0]


async def views(engine: Engine, claim_ids: list[str], actors: list[str]) -> dict[str, object]:
    """Every view across claims, as the read API answers it."""
    app = create_app(engine)
    got: dict[str, object] = {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        paths = ["/scorecard", *(f"/scorecard/{c}" for c in CAPABILITIES)]
        paths += [f"/claims?sort={sort}&limit=100" for sort in ("id", "recent", "contested", "evidence")]
        paths += ["/claims?q=sharper&limit=100", "/claims?standing=contested&limit=100", f"/claims?capability={CAPABILITIES[0]}&limit=100"]
        paths += [f"/contributors/{actor}" for actor in actors]
        for path in paths:
            response = await http.get(path)
            assert response.status_code in (200, 404), (path, response.text)
            got[path] = response.json()
        response = await http.post("/claims/counts", json={"claim_ids": claim_ids})
        got["/claims/counts"] = response.json()
    for path, body in got.items():
        # The scorecard's applied_seq is the lowest checkpoint: with a checkpoint per partition, the last
        # event of the partition whose last event comes first (every event up to it is in the counts).
        if path.startswith("/scorecard"):
            got[path] = {key: value for key, value in body.items() if key != "applied_seq"} | {"applied_seq>=": lowest(engine)}
    return got


def lowest(engine: Engine) -> int:
    with engine.connect() as conn:
        return min(queries.positions(conn).values(), default=0)


def without_checkpoints(checksums: dict[str, str]) -> dict[str, str]:
    """The read models' checksums without the checkpoints: one per partition here, one in all there."""
    return {table: value for table, value in checksums.items() if table != "projection_checkpoints"}


def last_of_partitions(layout: LogLayout, stored: list[tuple[int, str]]) -> dict[int, list[int]]:
    seqs: dict[int, list[int]] = defaultdict(list)
    for seq, claim_id in stored:
        seqs[layout.partition_of(claim_id)].append(seq)
    return seqs


@pytest.mark.parametrize("seed", SEEDS)
async def test_partition_owners_committing_at_once_fold_what_one_process_folds(
    seed: int, nats_url: str, claim_log: ClaimLog, engine: Engine, replay_engine: Engine
):
    rng = random.Random(seed)
    stored: list[tuple[int, str]] = []
    for claim_id, events in generate(rng):
        head = await claim_log.claim_head(claim_id)
        appended = await claim_log.append(claim_id, events, expected_seq=head.seq, prev_hash=head.hash)
        stored.extend((seq, claim_id) for seq in range(appended.last_seq - len(events) + 1, appended.last_seq + 1))
    head = await claim_log.head()
    assert head == len(stored)

    await Projector(claim_log, replay_engine, build_projections(), name="clean", batch=1000).run_until(head)
    with replay_engine.connect() as conn:
        clean = without_checkpoints(table_checksums(conn))
    claim_ids = sorted({claim_id for _, claim_id in stored})
    actors = [actor.id for actor in ACTORS]
    expected = await views(replay_engine, claim_ids, actors)
    assert expected["/claims?sort=id&limit=100"]["items"], "the clean replay has claims"

    seqs = last_of_partitions(claim_log.layout, stored)
    victim = max(seqs, key=lambda k: len(seqs[k]))  # the busiest partition: killed with much left to do
    for owners in (1, 2, 4):
        clear_place(engine)
        plan = Plan(
            owners=owners,
            lasts={k: s[-1] for k, s in seqs.items()},
            victim=victim,
            mid=seqs[victim][len(seqs[victim]) // 2],
            batches={k: rng.randint(1, 40) for k in seqs},
        )
        await asyncio.to_thread(fold_by_owners, nats_url, claim_log, engine, plan)
        with engine.connect() as conn:
            assert without_checkpoints(table_checksums(conn)) == clean, f"{owners} owners"
        folded = await views(engine, claim_ids, actors)
        lowest_last = min(s[-1] for s in seqs.values())
        assert {p: v.pop("applied_seq>=") for p, v in folded.items() if p.startswith("/scorecard")} == dict.fromkeys(
            [p for p in folded if p.startswith("/scorecard")], lowest_last
        )
        assert folded == {p: {k: v for k, v in body.items() if k != "applied_seq>="} if p.startswith("/scorecard") else body for p, body in expected.items()}, f"{owners} owners"
