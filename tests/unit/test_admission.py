"""The gate's pure part (services/admission/): a verdict for any message, whatever its bytes and headers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from events import Actor, encode
from events.claim import ClaimSuperseded
from events.relation import ClaimsUnrelated
from services.admission import Admitted, Gate, InOrder, Refused
from services.log import Delivery, StoredEvent
from services.log.connection import RESTORED_TIME
from services.log.reader import parse_store_time, read_store_time
from services.log.signing import Attribution, Signer, SigningKey
from tests.builders import (
    BOT,
    MODEL,
    PERSON,
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

SERVER = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def test_a_store_time_keeps_its_offset():
    assert parse_store_time("2026-12-07T10:00:00-02:00") == datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
    assert parse_store_time("2026-12-07T10:00:00.123456789+01:00") == datetime(2026, 12, 7, 9, 0, 0, 123456, tzinfo=UTC)
    with pytest.raises(ValueError, match="outside the times"):
        parse_store_time("9999-12-31T23:59:59-14:00")


@pytest.mark.parametrize("text", ["yesterday", "", "2026-02-30T00:00:00Z", "2026-12-07T10:00:00+25:00", "9999-12-31T23:59:59-14:00", "0", "\x00"])
def test_an_unreadable_restored_store_time_is_a_reason_never_an_error(text: str):
    at, problem = read_store_time(SERVER, text)
    assert at == SERVER and problem is not None and "Claimlog-Stored-At" in problem


def test_a_restored_store_time_later_than_the_servers_is_refused_and_an_earlier_one_kept():
    assert read_store_time(SERVER, "9999-12-31T23:59:59.999999Z")[1] is not None
    assert read_store_time(SERVER, "2026-12-07T09:00:00Z") == (datetime(2026, 12, 7, 9, 0, tzinfo=UTC), None)
    delivery = Delivery(1, 0, "claims.CLM-0001.Junk", b"junk", "", {RESTORED_TIME: "yesterday"})
    assert delivery.stored_at == datetime(1970, 1, 1, tzinfo=UTC) and delivery.store_time()[1] is not None


def _stored(seq: int, event, *, subject: str | None = None, signer: Signer | None = None, **fields) -> StoredEvent:
    data = encode(event)
    signature = signer.headers([data])[0] if signer is not None else None
    return StoredEvent(seq, subject or f"claims.{event.claim_id}.{event.type}", SERVER, data, None, signature, **fields)


def test_the_gate_admits_or_refuses_with_the_reason_and_kind():
    signer = Signer.generate()
    gate = Gate(Attribution({signer.key_id: SigningKey(signer.key_id, BOT.id, signer.public_key, False, SERVER)}, 0))
    draft = drafted("CLM-0001", actor=BOT)
    assert isinstance(gate.stored(_stored(1, draft, signer=signer)), Admitted)
    cases = {
        "unreadable": StoredEvent(2, "claims.CLM-0001.Junk", SERVER, b"junk"),
        "time": _stored(3, draft, signer=signer, time_problem="its Claimlog-Stored-At cannot be read"),
        "subject": _stored(4, draft, subject="claims.CLM-0002.ClaimDrafted", signer=signer),
        "signature": _stored(5, attached("CLM-0001", actor=BOT)),  # unsigned after the requirement
    }
    for kind, stored in cases.items():
        verdict = gate.stored(stored)
        assert isinstance(verdict, Refused) and verdict.kind == kind and verdict.reason, kind


def test_a_repeat_is_refused_in_order_and_a_remembered_verdict_is_the_same():
    gate = Gate(remember=10)
    first = attached("CLM-0001", actor=BOT)
    in_order = InOrder(gate)
    assert isinstance(in_order.admit(_stored(1, drafted("CLM-0001"))), Admitted)
    assert isinstance(in_order.admit(_stored(2, first)), Admitted)
    again = in_order.admit(_stored(3, first))
    assert isinstance(again, Refused) and again.kind == "repeat" and "seq 2" in again.reason
    assert gate.stored(_stored(1, first)) == gate.stored(_stored(1, first))


def test_a_remembered_verdict_is_the_messages_not_its_sequences():
    signer = Signer.generate()
    gate = Gate(Attribution({signer.key_id: SigningKey(signer.key_id, BOT.id, signer.public_key, False, SERVER)}, 0), remember=10)
    honest = _stored(1, attached("CLM-0001", actor=BOT), signer=signer)
    assert isinstance(gate.stored(honest), Admitted) and isinstance(gate.stored(honest), Admitted)
    # Another message at the same sequence (a stream made again), with the first one's signature headers.
    other = StoredEvent(1, honest.subject, SERVER, encode(attached("CLM-0001", "s2", actor=BOT)), None, honest.signature)
    refused = gate.stored(other)
    assert isinstance(refused, Refused) and refused.kind == "signature"


C = "CLM-0001"
TWIN = Actor(id="drafter-twin", kind="model", model=MODEL.model)  # another actor of the drafting model's name
CRITIC = Actor(id="critic", kind="model", model="other-model")


def _superseded(by: str) -> ClaimSuperseded:
    return ClaimSuperseded(event_id="00000000-0000-7000-8000-000000000001", claim_id=C, occurred_at=SERVER, actor=PERSON, superseded_by=by)


def _unrelated(key: str) -> ClaimsUnrelated:
    return ClaimsUnrelated(event_id="00000000-0000-7000-8000-000000000002", claim_id=C, occurred_at=SERVER, actor=PERSON, related_key=key)


# Each rule the command side applies that a claim's own events can judge (events/rules.py): the claim's
# events before, the event that breaks the rule, and what its refusal says.
BROKEN = {
    "drafted twice": ([drafted(C)], drafted(C, actor=PERSON), f"{C} is already drafted"),
    "not drafted": ([], attached(C), f"no claim {C}: draft it first"),
    "retracted: a new source": ([drafted(C), retracted(C)], attached(C), f"{C} is retracted: it cannot take SourceAttached"),
    "superseded: a review": ([drafted(C), _superseded("CLM-0002")], reviewed(C), f"{C} is superseded: it cannot take ReviewRecorded"),
    "retracted: a revision": ([drafted(C), retracted(C)], revised(C), "it cannot take ClaimRevised"),
    "superseded by itself": ([drafted(C)], _superseded(C), f"{C} cannot supersede itself"),
    "a source twice": ([drafted(C), attached(C)], attached(C, actor=PERSON), f"{C} already has a source 's1'"),
    "correcting no source": ([drafted(C)], corrected(C, measured="m"), f"{C} has no source 's1'"),
    "withdrawing no source": ([drafted(C)], withdrawn(C), f"{C} has no source 's1'"),
    "withdrawing a source twice": ([drafted(C), attached(C), withdrawn(C)], withdrawn(C), "source 's1' of CLM-0001 is already withdrawn"),
    "a disagreement twice": ([drafted(C), filed(C)], filed(C, actor=MODEL), f"{C} already has a disagreement 'd1'"),
    "disagreeing with no source": ([drafted(C)], filed(C, source_id="s9"), f"{C} has no source 's9' to disagree with"),
    "answering no disagreement": ([drafted(C)], answered(C, "d9"), f"{C} has no disagreement 'd9'"),
    "resolving twice": ([drafted(C), filed(C), resolved(C)], resolved(C), "disagreement 'd1' of CLM-0001 is already resolved"),
    "a review by a service": ([drafted(C)], reviewed(C, actor=BOT), "reviews are by a person or an AI model, not by a service"),
    "a review by the drafter": ([drafted(C)], reviewed(C, kind="ai", actor=MODEL), "'drafter' drafted this claim"),
    "a review by the drafting model": ([drafted(C)], reviewed(C, kind="ai", actor=TWIN), "a model draft is reviewed by a person or by another AI model"),
    "a review twice": ([drafted(C), reviewed(C)], reviewed(C, kind="ai", actor=CRITIC), f"{C} already has a review 'r1'"),
    "a review of revision 2**70": ([drafted(C)], reviewed(C, revision=2**70), f"revision {2**70} does not exist: the claim is at revision 1"),
    "a review of a revision not reached": ([drafted(C)], reviewed(C, revision=2), "revision 2 does not exist"),
    "a model's review as a person's": ([drafted(C)], reviewed(C, kind="person", actor=CRITIC), "'critic' (model) has reviewer_kind 'ai', not 'person'"),
    "withdrawing no review": ([drafted(C)], review_withdrawn(C), f"{C} has no review 'r1'"),
    "withdrawing a review twice": ([drafted(C), reviewed(C), review_withdrawn(C)], review_withdrawn(C), "review 'r1' of CLM-0001 is already withdrawn"),
    "unrelating what is not related": ([drafted(C)], _unrelated("CLM-0009"), f"{C} is not related to CLM-0009"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_in_order_refuses_an_event_against_the_rules_with_the_rule_and_folds_nothing_of_it(case: str):
    before, breaking, said = BROKEN[case]
    in_order = InOrder(Gate())
    for seq, event in enumerate(before, start=1):
        assert isinstance(in_order.admit(_stored(seq, event)), Admitted), event
    verdict = in_order.admit(_stored(len(before) + 1, breaking))
    assert isinstance(verdict, Refused) and verdict.kind == "rule", verdict
    assert verdict.reason.startswith("against the rules: ") and said in verdict.reason, verdict.reason
    # The claim goes on as if the refused event were not there: what follows is judged as by a gate that never saw it.
    never_saw = InOrder(Gate())
    for seq, event in enumerate(before, start=1):
        never_saw.admit(_stored(seq, event))
    probe = [drafted(C, actor=PERSON), attached(C), withdrawn(C), filed(C), resolved(C), reviewed(C, "r1", "ai", actor=CRITIC),
             review_withdrawn(C), revised(C, statement="S, again."), reviewed(C, "r2", revision=2), _unrelated("CLM-0009")]
    seqs = range(len(before) + 2, len(before) + 2 + len(probe))
    assert [_kind(in_order.admit(_stored(n, e))) for n, e in zip(seqs, probe, strict=True)] == [
        _kind(never_saw.admit(_stored(n, e))) for n, e in zip(seqs, probe, strict=True)
    ]


def _kind(verdict) -> str:
    return verdict.reason if isinstance(verdict, Refused) else "admitted"


def test_in_order_admits_what_the_rules_allow_and_the_review_a_revision_made_possible():
    in_order = InOrder(Gate())
    life = [drafted(C), attached(C), filed(C, source_id="s1"), answered(C), resolved(C), revised(C, statement="S, revised."),
            reviewed(C, revision=2), reviewed(C, "r2", "ai", actor=CRITIC), review_withdrawn(C), corrected(C, measured="m"),
            withdrawn(C), retracted(C), review_withdrawn(C, "r2")]
    assert [type(in_order.admit(_stored(seq, e))).__name__ for seq, e in enumerate(life, start=1)] == ["Admitted"] * len(life)


def test_an_imported_review_is_the_pages_word_on_its_revision_and_judged_by_who_the_page_says_wrote_it():
    in_order = InOrder(Gate())
    assert isinstance(in_order.admit(_stored(1, drafted(C))), Admitted)
    imported = {"imported_from": "page.txt", "actor": BOT}
    late = reviewed(C, revision=7, written_by=PERSON, **imported)
    assert isinstance(in_order.admit(_stored(2, late)), Admitted)
    by_the_drafter = reviewed(C, "r2", "ai", revision=1, written_by=MODEL, **imported)
    refused = in_order.admit(_stored(3, by_the_drafter))
    assert isinstance(refused, Refused) and refused.kind == "rule" and "'drafter' drafted this claim" in refused.reason


def test_in_order_judges_a_claim_it_starts_past_by_the_facts_it_is_given():
    from events.rules import ClaimFacts

    facts = ClaimFacts(C, drafted=True, drafted_by=MODEL, revision=3, sources={"s1": "withdrawn"})
    in_order = InOrder(Gate(), facts={C: facts})
    assert isinstance(in_order.admit(_stored(10, reviewed(C, revision=3))), Admitted)
    refused = in_order.admit(_stored(11, withdrawn(C)))
    assert isinstance(refused, Refused) and "already withdrawn" in refused.reason
