"""Every rule of ``decide``: given these events, when this command, then these events or a rejection of this kind."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime

import pytest

from events import Actor, Event
from events.registry import EVENT_TYPES
from events.rules import CLOSED_TO
from services.commands import ClaimState, Context, Kind, Rejected, decide, parse_command
from services.commands.decide import referenced_claims
from services.commands.models import COMMAND_TYPES
from services.log import event_hash

CLAIM, OTHER, MISSING = "CLM-0001", "CLM-0002", "CLM-0404"
PERSON = Actor(id="ada", kind="person")
MODEL = Actor(id="drafter", kind="model", model="m-1")
SERVICE = Actor(id="bot", kind="service")
DRAFTER = Actor(id="carol", kind="person")  # who wrote the events ``given`` holds
NOW = datetime(2026, 12, 1, tzinfo=UTC)
_ids = itertools.count(1)
# The commands whose events a closed claim no longer takes (the contract's rule: events/rules.py).
CLOSED_FOR = frozenset(name for name, model in COMMAND_TYPES.items() if model.event_type().__name__ in CLOSED_TO)

DRAFTED = ("ClaimDrafted", {"slug": "s", "statement": "S.", "capability": "C", "observed_on": "O."})
RETRACTED = ("ClaimRetracted", {"reason": "wrong"})
SUPERSEDED = ("ClaimSuperseded", {"superseded_by": OTHER})
SOURCE = ("SourceAttached", {"source_id": "s1", "relation": "supports", "measured": "m"})
SOURCE_WITHDRAWN = ("SourceWithdrawn", {"source_id": "s1", "reason": "r"})
DISAGREEMENT = ("DisagreementFiled", {"disagreement_id": "d1", "argument": "a"})
RESOLVED = ("DisagreementResolved", {"disagreement_id": "d1", "outcome": "upheld"})
REVIEW = ("ReviewRecorded", {"review_id": "r1", "reviewer_kind": "person", "verdict": "sound", "confidence": "low", "revision": 1})
REVIEW_WITHDRAWN = ("ReviewWithdrawn", {"review_id": "r1", "reason": "r"})
RELATED = ("ClaimsRelated", {"related_claim_id": OTHER})

# One valid body of every command, on a claim that has SOURCE, DISAGREEMENT, REVIEW and RELATED.
BODIES = {
    "draft_claim": {"slug": "s", "statement": "S.", "capability": "C", "observed_on": "O."},
    "revise_claim": {"statement": "S, revised."},
    "retract_claim": {"reason": "wrong"},
    "supersede_claim": {"superseded_by": OTHER},
    "attach_source": {"source_id": "s2", "relation": "supports", "measured": "m"},
    "correct_source": {"source_id": "s1", "measured": "m, corrected"},
    "withdraw_source": {"source_id": "s1", "reason": "r"},
    "file_disagreement": {"disagreement_id": "d2", "argument": "a"},
    "answer_disagreement": {"disagreement_id": "d1", "answer": "y"},
    "resolve_disagreement": {"disagreement_id": "d1", "outcome": "upheld"},
    "record_review": {"review_id": "r2", "verdict": "sound", "confidence": "low", "revision": 1},
    "withdraw_review": {"review_id": "r1", "reason": "r"},
    "relate_claims": {"related_claim_id": OTHER},
    "unrelate_claims": {"related_key": OTHER},
}
EVERYTHING_ON_IT = (DRAFTED, SOURCE, DISAGREEMENT, REVIEW, RELATED)


def given(*events: tuple[str, dict], by: Actor = DRAFTER) -> ClaimState:
    """The claim's state after these events, in this order, all by ``by``."""
    state = ClaimState(CLAIM)
    for seq, (type_, fields) in enumerate(events, start=1):
        event = EVENT_TYPES[type_](event_id=_event_id(), occurred_at=NOW, actor=by, claim_id=CLAIM, **fields)
        state.evolve(event, seq, event_hash(event.model_dump_json().encode()))
    return state


def when(
    state: ClaimState, command: str, *, actor: Actor = PERSON, existing: frozenset[str] = frozenset({OTHER}),
    slug_owner: str | None = None, **body,
) -> list[Event]:
    """The events ``decide`` makes of the command (``BODIES[command]`` unless a body is given)."""
    parsed = parse_command({"command": command, "claim_id": CLAIM, **(body or BODIES[command])})
    ctx = Context(actor=actor, event_id=_event_id(), now=NOW, existing_claims=existing, prev_hash=state.head_hash, slug_owner=slug_owner)
    return decide(parsed, state, ctx)


def then_rejected(kind: Kind, reason: str, state: ClaimState, command: str, /, **when_args) -> None:
    with pytest.raises(Rejected) as rejected:
        when(state, command, **when_args)
    assert (rejected.value.kind, rejected.value.reason) == (kind, reason)


def _event_id() -> str:
    return f"00000000-0000-7000-8000-{next(_ids):012d}"


def test_a_new_claim_is_drafted():
    [event] = when(given(), "draft_claim")
    assert (event.type, event.claim_id, event.statement, event.actor) == ("ClaimDrafted", CLAIM, "S.", PERSON)


def test_a_claim_is_drafted_once():
    then_rejected(Kind.CONFLICT, "claim_exists", given(DRAFTED), "draft_claim")


def test_a_slug_belongs_to_the_first_claim_that_took_it():
    then_rejected(Kind.CONFLICT, "slug_taken", given(), "draft_claim", slug_owner=OTHER)
    [event] = when(given(), "draft_claim", slug_owner=CLAIM)  # its own (a retried draft took it already)
    assert event.slug == "s"


@pytest.mark.parametrize("command", sorted(set(BODIES) - {"draft_claim"}))
def test_every_other_command_needs_a_drafted_claim(command: str):
    then_rejected(Kind.NOT_FOUND, "claim_not_found", given(), command)


@pytest.mark.parametrize("closing", [RETRACTED, SUPERSEDED], ids=["retracted", "superseded"])
@pytest.mark.parametrize("command", sorted(CLOSED_FOR))
def test_a_closed_claim_takes_nothing_new(command: str, closing: tuple[str, dict]):
    lifecycle = "retracted" if closing is RETRACTED else "superseded"
    then_rejected(Kind.CONFLICT, f"claim_{lifecycle}", given(*EVERYTHING_ON_IT, closing), command)


@pytest.mark.parametrize("command", sorted(set(BODIES) - CLOSED_FOR - {"draft_claim"}))
def test_what_is_on_a_closed_claim_can_still_be_withdrawn_corrected_answered_resolved_or_unrelated(command: str):
    [event] = when(given(*EVERYTHING_ON_IT, RETRACTED), command)
    assert event.claim_id == CLAIM


@pytest.mark.parametrize("command", sorted(set(BODIES) - {"draft_claim"}))
def test_an_active_claim_takes_every_command(command: str):
    [event] = when(given(*EVERYTHING_ON_IT), command)
    assert event.type == parse_command({"command": command, "claim_id": CLAIM, **BODIES[command]}).event_type().__name__


@pytest.mark.parametrize("command", sorted(BODIES))
def test_a_commands_facts_are_its_fields_but_command_and_event_id_and_its_event_carries_them(command: str):
    parsed = parse_command({"command": command, "claim_id": CLAIM, "event_id": _event_id(), **BODIES[command]})
    facts = parsed.facts()
    assert list(facts) == [name for name in type(parsed).model_fields if name not in ("command", "event_id")]
    assert facts == {name: getattr(parsed, name) for name in facts}
    [event] = when(given(*EVERYTHING_ON_IT) if command != "draft_claim" else ClaimState(CLAIM), command)
    assert {name: getattr(event, name) for name in facts} == facts


def test_a_claim_cannot_supersede_itself():
    then_rejected(Kind.INVALID, "superseded_by_itself", given(DRAFTED), "supersede_claim", superseded_by=CLAIM)


@pytest.mark.parametrize(("command", "field"), [("supersede_claim", "superseded_by"), ("relate_claims", "related_claim_id")])
def test_the_other_claim_named_by_id_must_exist(command: str, field: str):
    then_rejected(Kind.NOT_FOUND, "claim_not_found", given(DRAFTED), command, existing=frozenset(), **{field: MISSING})
    assert referenced_claims(parse_command({"command": command, "claim_id": CLAIM, field: MISSING})) == {MISSING}


def test_a_relation_by_statement_needs_no_other_claim():
    [event] = when(given(DRAFTED), "relate_claims", existing=frozenset(), statement="Another claim's statement.")
    assert event.type == "ClaimsRelated" and event.related_claim_id is None


@pytest.mark.parametrize(
    ("command", "body", "kind"),
    [
        ("attach_source", {"source_id": "s1", "relation": "supports", "measured": "m"}, "source"),
        ("file_disagreement", {"disagreement_id": "d1", "argument": "a"}, "disagreement"),
        ("record_review", {"review_id": "r1", "verdict": "sound", "confidence": "low", "revision": 1}, "review"),
    ],
)
def test_sources_disagreements_and_reviews_are_named_once(command: str, body: dict, kind: str):
    then_rejected(Kind.CONFLICT, f"{kind}_exists", given(*EVERYTHING_ON_IT), command, **body)


def test_a_withdrawn_source_keeps_its_name():
    then_rejected(Kind.CONFLICT, "source_exists", given(DRAFTED, SOURCE, SOURCE_WITHDRAWN), "attach_source", **{
        "source_id": "s1", "relation": "supports", "measured": "m"})


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("correct_source", "source"), ("withdraw_source", "source"),
        ("answer_disagreement", "disagreement"), ("resolve_disagreement", "disagreement"),
        ("withdraw_review", "review"),
    ],
)
def test_acting_on_a_source_disagreement_or_review_needs_it_to_exist(command: str, kind: str):
    then_rejected(Kind.NOT_FOUND, f"{kind}_not_found", given(DRAFTED), command)


@pytest.mark.parametrize(
    ("closing", "command", "reason"),
    [
        (SOURCE_WITHDRAWN, "correct_source", "source_withdrawn"),
        (SOURCE_WITHDRAWN, "withdraw_source", "source_withdrawn"),
        (RESOLVED, "answer_disagreement", "disagreement_resolved"),
        (RESOLVED, "resolve_disagreement", "disagreement_resolved"),
        (REVIEW_WITHDRAWN, "withdraw_review", "review_withdrawn"),
    ],
)
def test_a_withdrawn_source_or_review_or_a_resolved_disagreement_is_done_with(closing, command: str, reason: str):
    then_rejected(Kind.CONFLICT, reason, given(*EVERYTHING_ON_IT, closing), command)


def test_a_disagreement_with_a_source_needs_that_source():
    then_rejected(Kind.NOT_FOUND, "source_not_found", given(DRAFTED), "file_disagreement", disagreement_id="d1", argument="a", source_id="s9")
    [event] = when(given(DRAFTED, SOURCE), "file_disagreement", disagreement_id="d1", argument="a", source_id="s1")
    assert (event.type, event.source_id) == ("DisagreementFiled", "s1")


def test_a_service_does_not_review():
    then_rejected(Kind.FORBIDDEN, "reviewer_not_allowed", given(DRAFTED), "record_review", actor=SERVICE)


@pytest.mark.parametrize(("actor", "reviewer_kind"), [(PERSON, "person"), (MODEL, "ai")])
def test_the_reviewer_kind_follows_from_the_actor(actor: Actor, reviewer_kind: str):
    [event] = when(given(DRAFTED), "record_review", actor=actor)
    assert event.reviewer_kind == reviewer_kind


@pytest.mark.parametrize("drafter", [PERSON, MODEL], ids=["person", "model"])
def test_no_actor_reviews_a_claim_it_drafted(drafter: Actor):
    then_rejected(Kind.FORBIDDEN, "own_draft", given(DRAFTED, by=drafter), "record_review", actor=drafter)


def test_a_model_does_not_review_a_draft_of_the_same_model():
    same_model = Actor(id="drafter-again", kind="model", model=MODEL.model)
    then_rejected(Kind.FORBIDDEN, "same_model", given(DRAFTED, by=MODEL), "record_review", actor=same_model)


@pytest.mark.parametrize("reviewer", [PERSON, Actor(id="critic", kind="model", model="m-2")], ids=["person", "other model"])
def test_a_model_draft_is_reviewed_by_a_person_or_another_model(reviewer: Actor):
    [event] = when(given(DRAFTED, by=MODEL), "record_review", actor=reviewer)
    assert event.actor == reviewer


def test_a_review_is_of_a_revision_that_exists():
    then_rejected(Kind.INVALID, "revision_not_found", given(DRAFTED), "record_review",
                  review_id="r1", verdict="sound", confidence="low", revision=2)
    [event] = when(given(DRAFTED, ("ClaimRevised", {"statement": "S2."})), "record_review",
                   review_id="r1", verdict="sound", confidence="low", revision=2)
    assert event.revision == 2


def test_only_a_relation_the_claim_has_can_be_undone():
    then_rejected(Kind.NOT_FOUND, "relation_not_found", given(DRAFTED), "unrelate_claims")


def test_a_claim_is_not_related_to_itself():
    # Said as what it is, not as "no claim" (the claim itself is left out of the claims looked up).
    then_rejected(Kind.INVALID, "related_to_itself", given(DRAFTED), "relate_claims", existing=frozenset(), related_claim_id=CLAIM)
    then_rejected(Kind.INVALID, "related_to_itself", given(DRAFTED), "relate_claims", existing=frozenset({CLAIM}), related_claim_id=CLAIM)


def test_the_event_is_chained_to_the_claims_last_hash_and_carries_the_context():
    state = given(DRAFTED)
    [event] = when(state, "retract_claim")
    assert (event.prev_hash, event.occurred_at, event.type) == (state.head_hash, NOW, "ClaimRetracted")


def test_the_event_carries_each_value_of_the_context_in_its_own_field():
    state = given(DRAFTED)
    ctx = Context(actor=PERSON, event_id=_event_id(), now=NOW, correlation_id="corr-1", prev_hash=state.head_hash)
    [event] = decide(parse_command({"command": "retract_claim", "claim_id": CLAIM, "reason": "r"}), state, ctx)
    assert (event.actor, event.event_id, event.occurred_at, event.correlation_id, event.prev_hash) == (
        ctx.actor, ctx.event_id, ctx.now, ctx.correlation_id, ctx.prev_hash
    )


def test_a_context_is_built_by_keyword_only_so_no_caller_depends_on_the_order_of_its_fields():
    with pytest.raises(TypeError):
        Context(PERSON, _event_id(), NOW)  # type: ignore[misc]
    values = {
        "actor": PERSON, "event_id": _event_id(), "now": NOW, "correlation_id": "corr-1",
        "existing_claims": frozenset({OTHER}), "prev_hash": "a" * 64, "slug_owner": OTHER,
    }
    assert {field.name for field in dataclasses.fields(Context)} == set(values)
    ctx = Context(**values)
    assert {name: getattr(ctx, name) for name in values} == values


@pytest.mark.parametrize(
    ("reason", "problem"),
    [("x" * 20_001, "at most 20000 characters"), ("   ", "at least 1 character")],
)
def test_decide_validates_the_event_it_makes_even_of_a_command_no_one_validated(reason: str, problem: str):
    # A command made without validation (``model_construct``) cannot carry a value past the event's own checks.
    unchecked = COMMAND_TYPES["retract_claim"].model_construct(command="retract_claim", claim_id=CLAIM, event_id=None, reason=reason)
    with pytest.raises(Rejected, match=problem) as rejected:
        decide(unchecked, given(DRAFTED), Context(actor=PERSON, event_id=_event_id(), now=NOW))
    assert (rejected.value.kind, rejected.value.reason) == (Kind.INVALID, "invalid_command")


def test_decide_cleans_the_free_text_of_a_command_no_one_validated():
    unchecked = COMMAND_TYPES["retract_claim"].model_construct(command="retract_claim", claim_id=CLAIM, event_id=None, reason=" a\u202eb ")
    [event] = decide(unchecked, given(DRAFTED), Context(actor=PERSON, event_id=_event_id(), now=NOW))
    assert event.reason == "ab"


def test_a_naive_clock_reading_is_refused_as_the_event_refuses_it():
    with pytest.raises(Rejected, match="occurred_at needs a time zone"):
        decide(parse_command(BODIES["retract_claim"] | {"command": "retract_claim", "claim_id": CLAIM}), given(DRAFTED),
               Context(actor=PERSON, event_id=_event_id(), now=datetime(2026, 12, 1)))
