"""A synthetic registry workload: claims with sources, withdrawals, disagreements and reviews."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from events import Actor, Event, new_event_id
from events.claim import ClaimDrafted
from events.disagreement import DisagreementFiled, DisagreementResolved
from events.review import ReviewRecorded
from events.source import SourceAttached, SourceWithdrawn

MODEL = Actor(id="drafter", kind="model", model="drafting-model-3")
BOT = Actor(id="source-bot", kind="service")
PERSON = Actor(id="reviewer-7", kind="person")
WORDS = ["policy", "reward", "retrieval", "memory", "benchmark", "ablation", "baseline", "trajectory", "horizon", "agent", "planner", "critic", "segment", "sparse", "dense", "process", "outcome", "accuracy", "replication", "margin", "variance", "backbone"]


SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "quen", "dri", "sel", "bor", "nu", "phe"]
# 1,728 invented topic words: a statement names three, so a search for one matches a few in a thousand.
TOPICS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]


def statement(rng: random.Random) -> str:
    """A claim statement: common words, and three topic words that make searches selective."""
    return f"{sentence(rng, 34)[:-1]} on {' '.join(rng.sample(TOPICS, 3))}."


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def claim_events(claim_number: int, per_claim: int, rng: random.Random) -> list[Event]:
    """``per_claim`` events of one claim: a draft, then a mix of evidence, disagreement and review."""
    claim_id = f"CLM-{claim_number:07d}"
    now = datetime.now(UTC)
    base = {"claim_id": claim_id, "occurred_at": now}
    events: list[Event] = [
        ClaimDrafted(
            event_id=new_event_id(), **base, actor=MODEL, slug=f"claim-{claim_number}",
            statement=statement(rng), capability=f"Capability {claim_number % 12}",
            observed_on=sentence(rng, 20), drafted_confidence="low", falsifier=sentence(rng, 20),
        )
    ]
    sources = 0
    while len(events) < per_claim:
        roll = rng.random()
        if roll < 0.55 or sources == 0:
            sources += 1
            events.append(SourceAttached(
                event_id=new_event_id(), **base, actor=BOT, source_id=f"s{sources}",
                relation=rng.choice(["validates", "supports", "contradicts", "qualifies"]),
                measured=sentence(rng, 35), breadth=sentence(rng, 15),
            ))
        elif roll < 0.65:
            events.append(SourceWithdrawn(event_id=new_event_id(), **base, actor=PERSON, source_id=f"s{sources}", reason=sentence(rng, 8)))
        elif roll < 0.85:
            events.append(DisagreementFiled(event_id=new_event_id(), **base, actor=PERSON, disagreement_id=f"d{len(events)}", argument=sentence(rng, 30)))
            if len(events) < per_claim:
                events.append(DisagreementResolved(event_id=new_event_id(), **base, actor=PERSON, disagreement_id=f"d{len(events) - 1}", outcome="rejected"))
        else:
            events.append(ReviewRecorded(
                event_id=new_event_id(), **base, actor=PERSON, review_id=f"r{len(events)}",
                reviewer_kind="person", verdict="sound", confidence="medium", revision=1,
            ))
    return events[:per_claim]


def claim_commands(claim_number: int, per_claim: int, rng: random.Random) -> list[dict]:
    """``per_claim`` commands for one claim (JSON Lines objects): a draft, then evidence, disagreements, reviews."""
    claim_id = f"CLM-{claim_number:07d}"
    commands: list[dict] = [{
        "command": "draft_claim", "claim_id": claim_id, "slug": f"claim-{claim_number}",
        "statement": sentence(rng, 40), "capability": f"Capability {claim_number % 12}",
        "observed_on": sentence(rng, 20), "drafted_confidence": "low", "falsifier": sentence(rng, 20),
    }]
    sources = disagreements = 0
    while len(commands) < per_claim:
        roll = rng.random()
        if roll < 0.6 or sources == 0:
            sources += 1
            commands.append({
                "command": "attach_source", "claim_id": claim_id, "source_id": f"s{sources}",
                "relation": rng.choice(["validates", "supports", "contradicts", "qualifies"]),
                "measured": sentence(rng, 35), "breadth": sentence(rng, 15),
            })
        elif roll < 0.8:
            disagreements += 1
            commands.append({"command": "file_disagreement", "claim_id": claim_id, "disagreement_id": f"d{disagreements}", "argument": sentence(rng, 30)})
        elif roll < 0.9 and disagreements:
            commands.append({"command": "answer_disagreement", "claim_id": claim_id, "disagreement_id": f"d{disagreements}", "answer": sentence(rng, 20)})
        else:
            commands.append({"command": "withdraw_source", "claim_id": claim_id, "source_id": f"s{sources}", "reason": sentence(rng, 8)})
            sources += 1  # a withdrawn source is never withdrawn twice: the next ones get new ids
            commands.append({
                "command": "attach_source", "claim_id": claim_id, "source_id": f"s{sources}", "relation": "mentions",
                "measured": sentence(rng, 20),
            })
    return commands[:per_claim]


def write_commands(path, *, claims: int, per_claim: int, seed: int = 1) -> int:
    """A JSON Lines file of ``claims`` x ``per_claim`` commands; returns the number of lines."""
    import json

    rng = random.Random(seed)
    with open(path, "w") as out:
        for number in range(claims):
            for command in claim_commands(number, per_claim, rng):
                out.write(json.dumps(command) + "\n")
    return claims * per_claim
