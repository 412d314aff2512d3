"""What a broken or hostile holder of a producer's NATS credential could publish on the log: mutations of a
direct producer's signed events, each with the outcome the contract gives it (docs/security.md#signed-events).

The projector folds an event only if it decodes, its subject names the claim and type its body names, and
a key that may speak for its actor signed its stored bytes (or it is unsigned and stored before the signing
requirement), and its event id is not one its actor folded on its claim already (a replay of a stored event is a
repeat, projections/repeats.py). A mutation that keeps all of that (a signed event with a wrong
``prev_hash``) folds: the hash chain is what ``claimlog verify`` checks, not the projector.
"""

from __future__ import annotations

import base64
import json
import random
import uuid
from dataclasses import dataclass
from typing import Any

from events import Actor, Event, UnknownEventError, decode, encode
from events.subjects import DEFAULT_LAYOUT
from services.log.signing import SIGNATURE, Signer

PRODUCER = Actor(id="fuzz-producer", kind="service")
SOMEONE_ELSE = Actor(id="reviewer-7", kind="person")
API = Actor(id="claimlog-api", kind="service")  # holds a delegate key: it signs for the actors it authenticates
# Mutations whose signature makes them unattributable, whatever their bytes say.
MISSIGNED = ("unsigned", "bad_signature", "tampered", "unknown_key", "for_another", "delegate_for_producer")
# Mutations signed by the producer over their own stored bytes: they fold exactly when they read as events.
SIGNED = ("subject_mismatch", "truncated", "garbage", "wrong_type", "unknown_type", "huge_field", "wrong_prev_hash")
KINDS = (*MISSIGNED, *SIGNED, "replay", "duplicate")  # the last two republish a stored valid message
WRONG_VALUES: list[Any] = [
    None, True, -1, 0, 2**63, 10**30, 1.5, "", " ", "\x00", "\u202e", [], {}, [None], {"": None},
    "9999-12-31T23:59:59-14:00", "2026-02-30T00:00:00Z", "CLM-0001", "not-a-uuid",
]
UNKNOWN_TYPES = ("ClaimTeleported", "SourceAttachedV9", "Drafted", "claimdrafted")


@dataclass(frozen=True)
class Crafted:
    """One message to publish: its kind, subject, bytes and headers, and whether the projector may fold it."""

    kind: str
    subject: str
    data: bytes
    headers: dict[str, str] | None
    folds: bool


def readable_here(subject: str, data: bytes) -> bool:
    """Whether the bytes decode to an event of the claim and type its (published) subject names."""
    try:
        event = decode(data)
    except UnknownEventError:
        return False
    _, claim_id, event_type = subject.split(".")
    return (event.claim_id, event.type) == (claim_id, event_type)


def craft(
    kind: str, event: Event, *, head_hash: str | None, other_claim: str, signer: Signer, delegate: Signer, rng: random.Random
) -> Crafted:
    """A mutation of ``event`` (the next event of its claim, whose last stored event hashes to ``head_hash``),
    by the producer's ``signer`` or the API's ``delegate`` key."""
    subject = DEFAULT_LAYOUT.publish_subject(event.claim_id, event.type)
    chained = event.model_copy(update={"prev_hash": head_hash})
    data = encode(chained)
    if kind in MISSIGNED:
        data, headers = _missigned(kind, chained, data, signer, delegate, rng)
        return Crafted(kind, subject, data, headers, folds=False)
    if kind == "subject_mismatch":
        subject = DEFAULT_LAYOUT.publish_subject(other_claim, event.type)
    elif kind == "truncated":
        data = data[: rng.randrange(len(data))]
    elif kind == "garbage":
        data = rng.randbytes(rng.randint(0, 300))
    elif kind == "wrong_type":
        body = json.loads(data)
        for _ in range(rng.randint(1, 2)):
            body[rng.choice([*body, "actor"])] = rng.choice(WRONG_VALUES)
        data = json.dumps(body).encode()
    elif kind == "unknown_type":
        body = {**json.loads(data), "type": rng.choice(UNKNOWN_TYPES)}
        subject = DEFAULT_LAYOUT.publish_subject(event.claim_id, body["type"])
        data = json.dumps(body).encode()
    elif kind == "huge_field":
        body = json.loads(data)
        texts = [name for name, value in body.items() if isinstance(value, str) and name not in ("type", "claim_id")]
        # Past the contract's 20,000 characters, within the stream's max_msg_size (60,000 bytes with the
        # headers), which the server would refuse to store at all.
        body[rng.choice(texts)] = "x" * rng.randint(20_001, 50_000)
        data = json.dumps(body).encode()
    elif kind == "wrong_prev_hash":
        data = encode(event.model_copy(update={"prev_hash": rng.randbytes(32).hex()}))
    else:
        raise ValueError(f"unknown mutation {kind!r}: one of {', '.join(KINDS)}")
    return Crafted(kind, subject, data, signer.headers([data])[0], folds=readable_here(subject, data))


def _missigned(
    kind: str, event: Event, data: bytes, signer: Signer, delegate: Signer, rng: random.Random
) -> tuple[bytes, dict[str, str] | None]:
    """Bytes and headers of an event no key that may speak for its actor signed as stored."""
    if kind == "unsigned":
        return data, None
    if kind == "bad_signature":
        headers = signer.headers([data])[0]
        if rng.random() < 0.5:
            return data, signer.headers([data + b" "])[0]  # a real signature, over other bytes
        return data, {**headers, SIGNATURE: "v1." + base64.urlsafe_b64encode(rng.randbytes(64)).decode().rstrip("=")}
    if kind == "tampered":  # signed, then its chain link (or its text) changed in the stored bytes
        headers = signer.headers([data])[0]
        changed = {"prev_hash": rng.randbytes(32).hex()} if rng.random() < 0.5 else {"event_id": str(uuid.UUID(bytes=rng.randbytes(16)))}
        return encode(event.model_copy(update=changed)), headers
    if kind == "unknown_key":
        return data, Signer.generate().headers([data])[0]
    if kind == "for_another":  # the producer's key, signing an event of an actor it may not speak for
        data = encode(event.model_copy(update={"actor": SOMEONE_ELSE}))
        return data, signer.headers([data])[0]
    if kind == "delegate_for_producer":  # the API's key, for a direct producer: nobody speaks for one
        return data, delegate.headers([data])[0]
    raise ValueError(f"{kind!r} is not a mis-signed mutation")
