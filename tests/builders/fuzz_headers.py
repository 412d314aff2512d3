"""Mutations of a signed event's headers (tests/builders/fuzz_run.py): what a holder of a publish credential can
set besides the bytes. Each keeps the event's bytes, signed by the producer, and changes one header:

- ``Claimlog-Stored-At`` (the store time an import restores): unreadable, an offset past the last time in
  UTC, or later than the server stores it: refused by the gate (services/admission/), never a reader's crash;
- the signature headers: the proof missing or malformed, another key named as the signer, a signature
  version no reader knows: refused;
- ``Nats-Msg-Id``: another stored message's id (the server drops it as a duplicate within its window)
  or a fresh one: the event folds, once.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from events import Event, encode
from events.subjects import DEFAULT_LAYOUT
from services.log.connection import RESTORED_TIME
from services.log.signing import PROOF, SIGNATURE, SIGNER, Signer
from tests.builders.fuzz_mutations import Crafted

REFUSED_HEADERS = ("time_unreadable", "time_future", "proof_missing", "proof_malformed", "signer_swapped", "signature_version")
FOLDING_HEADERS = ("msg_id_taken", "msg_id_fresh")
HEADER_KINDS = (*REFUSED_HEADERS, *FOLDING_HEADERS)
UNREADABLE_TIMES = ("yesterday", "9999-12-31T23:59:59-14:00", "2026-02-30T00:00:00Z", "2026-12-07T10:00:00+25:00", "0", "2026-12-07 10:00")
FUTURE_TIMES = ("9999-12-31T23:59:59.999999Z", "2999-01-01T00:00:00+01:00", "2100-01-01T00:00:00.123456789Z")
BAD_PROOFS = ("0/0", "5/2", "0/2", "x/y", "0/1;AAAA", "-1/1", "0/100001")


@dataclass(frozen=True)
class Taken:
    """A message id already stored in the log (the server deduplicates a publish under it within its window)."""

    msg_id: str | None


def craft_headers(kind: str, event: Event, *, head_hash: str | None, signer: Signer, delegate: Signer, rng: random.Random, taken: Taken) -> Crafted:
    """The claim's next ``event``, chained to ``head_hash`` and signed by ``signer``, with one header mutated."""
    subject = DEFAULT_LAYOUT.publish_subject(event.claim_id, event.type)
    data = encode(event.model_copy(update={"prev_hash": head_hash}))
    headers = dict(signer.headers([data])[0])
    folds = kind in FOLDING_HEADERS
    if kind == "time_unreadable":
        headers[RESTORED_TIME] = rng.choice(UNREADABLE_TIMES)
    elif kind == "time_future":
        headers[RESTORED_TIME] = rng.choice(FUTURE_TIMES)
    elif kind == "proof_missing":
        del headers[PROOF]
    elif kind == "proof_malformed":
        headers[PROOF] = rng.choice(BAD_PROOFS)
    elif kind == "signer_swapped":  # the producer's signature, another registered key named as its signer
        headers[SIGNER] = delegate.key_id
    elif kind == "signature_version":
        headers[SIGNATURE] = "v2." + headers[SIGNATURE].removeprefix("v1.")
    elif kind == "msg_id_taken":
        headers["Nats-Msg-Id"] = taken.msg_id or str(uuid.UUID(bytes=rng.randbytes(16)))
    elif kind == "msg_id_fresh":
        headers["Nats-Msg-Id"] = str(uuid.UUID(bytes=rng.randbytes(16)))
    else:
        raise ValueError(f"unknown header mutation {kind!r}: one of {', '.join(HEADER_KINDS)}")
    return Crafted(kind, subject, data, headers, folds=folds)
