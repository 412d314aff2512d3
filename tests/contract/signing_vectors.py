"""Test vectors of the write contract for producers in other languages, computed by claimlog's own code.

``signing_vectors.json`` holds a few events' exact stored bytes with their hash (``prev_hash`` of the
next) and ``Nats-Msg-Id``, a fixed Ed25519 key, and the signature headers of the first 1, 2, 3 and 5
of them signed as one append: enough to cover a single event, a full Merkle level and the odd levels
that carry their last node up. Ed25519 signatures are deterministic, so another language reproduces
every header exactly. Rewrite the file after a deliberate change of the contract with
``.venv/bin/python -m tests.contract.signing_vectors``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events import Actor
from services.log.chain import chain, event_hash
from services.log.signing import Signer
from services.log.writer import message_id
from tests.builders import attached, drafted, filed

VECTORS = Path(__file__).with_name("signing_vectors.json")
SET_SIZES = (1, 2, 3, 5)
PRODUCER = Actor(id="node-producer", kind="service")
RATER = Actor(id="rater-7", kind="model", model="judge-2")


def _events():
    """Two claims' events in one signed set (as an atomic batch over many claims), texts beyond ASCII included."""
    first, second = "CLM-0001234", "CLM-0009876"
    ids = [f"019ad2f0-0000-7000-8000-00000000000{n}" for n in range(1, 6)]
    one = [
        drafted(first, actor=PRODUCER, event_id=ids[0], statement="Ünïcode survives: “quotes”, ∑ and 日本語."),
        attached(first, "node-s1", "supports", actor=PRODUCER, event_id=ids[1]),
        filed(first, "d1", actor=RATER, event_id=ids[2], argument="The baseline is untuned — by 3 points."),
    ]
    two = [drafted(second, actor=PRODUCER, event_id=ids[3]), attached(second, "s2", actor=PRODUCER, event_id=ids[4])]
    return chain(one, None) + chain(two, None)


def build() -> dict:
    signer = Signer(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"claimlog signing test vectors").digest()))
    linked = _events()
    datas = [data for _, data in linked]
    return {
        "key": {"pem": signer.pem().decode(), "key_id": signer.key_id},
        "events": [
            {"data": data.decode(), "hash": event_hash(data), "message_id": message_id(event)} for event, data in linked
        ],
        "sets": [{"size": size, "headers": signer.headers(datas[:size])} for size in SET_SIZES],
    }


if __name__ == "__main__":
    VECTORS.write_text(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {VECTORS}")
