"""Hundreds of crafted events published with the writer's credential, between valid claims' events: the
projector never stops, each crafted event ends folded, parked or recorded unreadable, the valid claims'
pages are exactly their own events folded, and a clean replay of the same log gives the same tables.

Then the same with signatures required: a small fuzz run (tests/builders/fuzz_run.py), a direct producer's signed
events and mutations of their bytes (fuzz_mutations.py) and of their headers (fuzz_headers.py), checked by
fuzz_checks.py and, for every other reader of the log, fuzz_readers.py."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from events import decode, encode
from events.rules import ClaimFacts, event_breach
from projections.checksum import table_checksums
from projections.tables import unreadable_events
from services.log import ClaimLog, StreamSpec, connect
from services.read_api.queries import claim_page
from services.runtime.embedded import EmbeddedNats
from services.timeline.as_of import fold_page
from tests.builders import history
from tests.builders.fuzz_headers import HEADER_KINDS
from tests.builders.fuzz_mutations import KINDS, readable_here
from tests.builders.fuzz_run import fuzz
from tests.conftest import random_claim_id
from tests.integration.audit_log import project
from tests.integration.test_projector import append_history

CRAFTED = 300
EDGES: list[Any] = [
    None, True, -1, 0, 2**63, 10**30, 1.5, "", " ", "\x00", "\u202e", "x" * 25_000, [], {}, [None], {"": None},
    "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "2026-02-30T00:00:00Z", "CLM-0001", "not-a-uuid",
]


def crafted_events(rng: random.Random, claims: list[str]) -> Iterator[tuple[str, bytes]]:
    """(subject, bytes) of events a hostile or broken producer could publish on the crafted claims."""
    valid = [json.loads(encode(event)) for event in history("CLM-0001")]
    for _ in range(CRAFTED):
        claim = rng.choice(claims)
        event = {**rng.choice(valid), "claim_id": claim}
        kind = rng.random()
        if kind < 0.1:
            data = rng.randbytes(rng.randint(0, 200))
        elif kind < 0.2:
            data = json.dumps(rng.choice(EDGES)).encode()
        else:
            for _ in range(rng.randint(1, 3)):
                field = rng.choice([*event, "actor", "extra"])
                if rng.random() < 0.3:
                    event.pop(field, None)
                else:
                    event[field] = rng.choice([*EDGES, rng.choice(claims)]) if field == "claim_id" else rng.choice(EDGES)
            data = json.dumps(event).encode()
        kind = event.get("type")
        yield f"claims.{claim}.{kind if isinstance(kind, str) and kind.isalnum() and len(kind) < 40 else 'ClaimDrafted'}", data


def _not_folded(crafted: dict[int, tuple[str, bytes]]) -> set[int]:
    """The crafted events the projector records unreadable: not readable where they are, repeats (the
    crafted events are copies of a few events, so many share an event id on their claim), or against the
    rules their claim's events folded before set (events/rules.py), which leaves their id free."""
    folded, out, facts = set(), set(), {}
    for seq, (subject, data) in sorted(crafted.items()):
        if not readable_here(subject, data):
            out.add(seq)
            continue
        event = decode(data)
        claim = facts.setdefault(event.claim_id, ClaimFacts(event.claim_id))
        if (event.claim_id, event.actor.id, event.event_id) in folded or event_breach(claim, event) is not None:
            out.add(seq)
            continue
        claim.fold(event)
        folded.add((event.claim_id, event.actor.id, event.event_id))
    return out


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedNats]:
    embedded = EmbeddedNats(tmp_path / "nats", sync="always")
    embedded.start()
    yield embedded
    embedded.stop()


async def test_crafted_events_never_stop_the_projector_nor_touch_the_other_claims(
    server: EmbeddedNats, engine: Engine, replay_engine: Engine
):
    admin = ClaimLog(await connect(server.url_for("admin")), StreamSpec("CLAIMS"))
    await admin.ensure()
    writer = await connect(server.url_for("writer"))
    valid_claims, crafted_claims = [random_claim_id() for _ in range(5)], [random_claim_id() for _ in range(10)]
    rng = random.Random(20261205)
    crafted_seqs: dict[int, tuple[str, bytes]] = {}
    try:
        js = writer.jetstream()
        for index, (subject, data) in enumerate(crafted_events(rng, crafted_claims)):
            if index % 60 == 0:  # the valid claims' histories land between the crafted events
                await append_history(admin, valid_claims[index // 60])
            crafted_seqs[(await js.publish(subject, data)).seq] = (subject, data)
        head = await project(admin, engine)
        await project(admin, replay_engine)

        unreadable = _not_folded(crafted_seqs)
        with engine.connect() as conn:
            recorded = set(conn.execute(select(unreadable_events.c.seq)).scalars())
            assert recorded == unreadable, (
                "exactly the crafted events that cannot be read, are not where they say, or repeat an event id their claim folded, "
                "are recorded unreadable"
            )
            assert len(unreadable) < len(crafted_seqs), "some crafted events must decode, or the fold is not exercised"
            for claim_id in valid_claims:
                folded = fold_page(claim_id, await admin.read_claim(claim_id))
                stored = claim_page(conn, claim_id)
                assert stored is not None and stored.as_of_seq <= head
                assert replace(stored, related=[]) == replace(folded, related=[]), claim_id
            with replay_engine.connect() as clean:
                assert table_checksums(conn) == table_checksums(clean)
    finally:
        await writer.close()
        await admin.nc.close()


async def test_signed_events_and_their_mutations_fold_exactly_as_a_log_of_the_attributable_ones_alone(tmp_path: Path):
    outcome = await fuzz(events=400, seed=20261206, workdir=tmp_path)
    assert outcome.problems == []
    published = outcome.published
    assert {kind for kind in KINDS if published.sent[kind]} == set(KINDS), "every kind of mutation is published"
    assert {kind for kind in HEADER_KINDS if published.sent[kind]} == set(HEADER_KINDS), "every header is mutated"
    assert published.deduplicated["duplicate"] == published.sent["duplicate"], "a republished message id is stored once"
    assert outcome.unreadable, "the mutations must reach the projector, or nothing is tested"
    assert any(published.kinds[seq] == "wrong_prev_hash" for seq in published.folds), "a signed event off its chain folds"
    assert published.repeats and published.repeats <= outcome.unreadable, "a signed event stored again is a repeat, folded once"
