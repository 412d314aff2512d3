"""Counts equal the lengths of the lists they summarize, after any sequence of commands (property-based)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from events import Actor
from projections.base import Record
from projections.claim_page import fold
from projections.claim_pages import page_row
from projections.scorecard import STANDINGS
from services.commands import ClaimState, Context, Rejected, decide, parse_command
from services.log import event_hash

CLAIM = "CLM-0001"
ACTORS = [Actor(id="ada", kind="person"), Actor(id="drafter", kind="model", model="m-1"), Actor(id="bot", kind="service")]
RELATIONS = ["validates", "supports", "contradicts", "qualifies", "mentions"]
ids = st.sampled_from(["a", "b", "c"])
commands = st.one_of(
    st.builds(lambda i, r: {"command": "attach_source", "source_id": i, "relation": r, "measured": "m"}, ids, st.sampled_from(RELATIONS)),
    st.builds(lambda i, r: {"command": "correct_source", "source_id": i, "relation": r}, ids, st.sampled_from(RELATIONS)),
    st.builds(lambda i: {"command": "withdraw_source", "source_id": i, "reason": "r"}, ids),
    st.builds(lambda i: {"command": "file_disagreement", "disagreement_id": i, "argument": "x"}, ids),
    st.builds(lambda i: {"command": "answer_disagreement", "disagreement_id": i, "answer": "y"}, ids),
    st.builds(lambda i, o: {"command": "resolve_disagreement", "disagreement_id": i, "outcome": o}, ids, st.sampled_from(["upheld", "rejected", "withdrawn"])),
    st.builds(lambda i: {"command": "record_review", "review_id": i, "verdict": "sound", "confidence": "low", "revision": 1}, ids),
    st.builds(lambda i: {"command": "withdraw_review", "review_id": i, "reason": "r"}, ids),
    st.just({"command": "retract_claim", "reason": "r"}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(commands, st.sampled_from(ACTORS)), max_size=30), st.sampled_from(ACTORS))
def test_counts_equal_the_lengths_of_their_lists_after_any_commands(steps, drafter):
    state, records = ClaimState(CLAIM), []
    draft = {"command": "draft_claim", "slug": "s", "statement": "S.", "capability": "C", "observed_on": "O."}
    for seq, (body, actor) in enumerate([(draft, drafter), *steps], start=1):
        ctx = Context(
            actor=actor, event_id=f"00000000-0000-7000-8000-{seq:012d}", now=datetime(2026, 12, 1, tzinfo=UTC), prev_hash=state.head_hash
        )
        try:
            [event] = decide(parse_command({"claim_id": CLAIM, **body}), state, ctx)
        except Rejected:
            continue
        state.evolve(event, seq, event_hash(event.model_dump_json().encode()))
        records.append(Record(seq, ctx.now, event))
    page = fold(records)
    counts, active = page.counts, [s for s in page.sources if s.state == "active"]
    assert counts.sources_by_relation == {r: sum(1 for s in active if s.relation == r) for r in RELATIONS}
    assert counts.sources_active == len(active) and counts.sources_withdrawn == len(page.sources) - len(active)
    assert counts.disagreements_open == sum(1 for d in page.disagreements if d.state == "open")
    assert counts.disagreements_open + counts.disagreements_resolved == len(page.disagreements)
    live = [r for r in page.reviews if r.state == "active"]
    assert counts.reviews_person == sum(1 for r in live if r.reviewer_kind == "person")
    assert counts.reviews_person + counts.reviews_ai == len(live)
    assert page.status.standing in STANDINGS
    assert not (page.status.unreviewed_model_draft and page.status.counts_toward_scorecard)
    # The row's columns (what listings, counts and the scorecard read) equal the document's counts.
    row = page_row(page)
    doc = json.loads(row["doc"])["counts"]
    assert row["sources_validating"] == doc["sources_by_relation"]["validates"] and row["sources_active"] == doc["sources_active"]
    assert (row["disagreements_open"], row["reviews_ai"], row["standing"]) == (
        doc["disagreements_open"], doc["reviews_ai"], page.status.standing,
    )
