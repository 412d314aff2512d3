"""Ed25519 signatures of appended events, carried in message headers beside the stored bytes.

Whoever vouches for an append signs it once: the API for the actor it authenticated, a direct
producer for itself. One signature covers every event of an append (or of an atomic batch over many
claims): it signs the root of a Merkle tree over the events' SHA-256 hashes, and each message carries
the signature, the signing key's id and its own path to the root. So each stored event is checked
on its own, by any reader of any partition, without the other events of its batch, and a reader that
meets the same root again (the rest of a batch) finds it already checked.

Headers (contract version 1, docs/events.md#signatures):

- ``Claimlog-Signer``: the key's id, the first 32 hex digits of the SHA-256 of its raw public key;
- ``Claimlog-Signature``: ``v1.`` and the URL-safe base64 of the signature of ``claimlog/v1`` + NUL + root;
- ``Claimlog-Proof``: ``<index>/<count>`` of the event in the signed set, then, when the set holds more
  than one event, ``;`` and the sibling hashes from the leaf up (URL-safe base64, comma separated).

The signature covers the stored bytes, which name the claim, the type and the actor: a signed event
moved to another claim's subject still fails the subject check.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from events.log_entry import (  # the headers' names, named where the log's entries name them
    PROOF,
    SIGNATURE,
    SIGNER,
)
from tlog.hashes import leaf_hash, node_hash  # RFC 6962's hashes: a signed set is such a tree

VERSION = "v1"
_CONTEXT = b"claimlog/v1\x00"
MAX_SIGNED = 100_000  # the largest set one signature may cover: a proof never holds more than 17 hashes


def key_id(public_key: Ed25519PublicKey) -> str:
    """A key's id: the first 32 hex digits of the SHA-256 of its raw 32 bytes."""
    return hashlib.sha256(raw_public(public_key)).hexdigest()[:32]


def raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_from_text(text: str) -> Ed25519PublicKey:
    """A public key from the URL-safe base64 of its raw bytes (as the key registry stores it)."""
    return Ed25519PublicKey.from_public_bytes(_unb64(text))


def public_text(public_key: Ed25519PublicKey) -> str:
    return _b64(raw_public(public_key))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def merkle(hashes: Sequence[bytes]) -> tuple[bytes, list[list[bytes]]]:
    """The root over events' SHA-256 hashes, and each event's path to it (sibling hashes from the leaf up).

    A level of odd length carries its last node up unchanged (it has no sibling at that level)."""
    level = [leaf_hash(h) for h in hashes]
    paths: list[list[bytes]] = [[] for _ in hashes]
    positions = list(range(len(hashes)))
    while len(level) > 1:
        for event, position in enumerate(positions):
            sibling = position ^ 1
            if sibling < len(level):
                paths[event].append(level[sibling])
            positions[event] = position // 2
        level = [node_hash(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0], paths


def root_from(event_hash: bytes, index: int, count: int, path: Sequence[bytes]) -> bytes:
    """The root an event's path leads to; ``ValueError`` when the path is not one of a set of ``count``."""
    if not 0 <= index < count <= MAX_SIGNED:
        raise ValueError(f"position {index} of {count} is not in a signed set")
    node, position, size, siblings = leaf_hash(event_hash), index, count, iter(path)
    while size > 1:
        if position ^ 1 < size:
            sibling = next(siblings, None)
            if sibling is None:
                raise ValueError("the proof is shorter than its set needs")
            node = node_hash(node, sibling) if position % 2 == 0 else node_hash(sibling, node)
        position, size = position // 2, (size + 1) // 2
    if next(siblings, None) is not None:
        raise ValueError("the proof is longer than its set needs")
    return node


class Signer:
    """A private key and its id: signs the events of one append at a time."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self.private_key = private_key
        self.public_key = private_key.public_key()
        self.key_id = key_id(self.public_key)

    @classmethod
    def generate(cls) -> Signer:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_file(cls, path: str | Path) -> Signer:
        """A signer from a PEM (PKCS#8, unencrypted) file, as ``claimlog actors key add`` writes it."""
        path = Path(path)
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except FileNotFoundError:
            raise ValueError(f"signing key {path}: no such file") from None
        except (ValueError, TypeError) as error:
            raise ValueError(f"signing key {path}: not an unencrypted PEM private key ({error})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"signing key {path}: a {type(key).__name__}, not an Ed25519 key")
        return cls(key)

    def pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def headers(self, datas: Sequence[bytes]) -> list[dict[str, str]]:
        """The signature headers of each of the events (their stored bytes, in order): one signature for all."""
        if not 0 < len(datas) <= MAX_SIGNED:
            raise ValueError(f"one signature covers 1 to {MAX_SIGNED} events, got {len(datas)}")
        root, paths = merkle([hashlib.sha256(data).digest() for data in datas])
        signature = f"{VERSION}.{_b64(self.private_key.sign(_CONTEXT + root))}"
        count = len(datas)
        return [
            {SIGNER: self.key_id, SIGNATURE: signature, PROOF: f"{index}/{count}" + (";" + ",".join(_b64(h) for h in path) if path else "")}
            for index, path in enumerate(paths)
        ]


def sign_messages(signer: Signer | None, messages: list[tuple[str, bytes, dict[str, str]]]) -> None:
    """Add one signature's headers to every message of an append (subject, bytes, headers), in place."""
    if signer is None:
        return
    for (_, _, headers), signed in zip(messages, signer.headers([data for _, data, _ in messages]), strict=True):
        headers.update(signed)


@dataclass(frozen=True)
class SigningKey:
    """A public key of the registry: whose it is, whether it signs for the actors the API authenticates
    (a delegate: the API's key), and when it was added and retired. It verifies only events stored while
    it was current: up to the log sequence it was retired after (``retired_after``, which no publisher
    sets); a key retired before registries kept that sequence, up to its retirement time."""

    key_id: str
    actor_id: str
    public_key: Ed25519PublicKey
    delegate: bool
    added_at: datetime
    retired_at: datetime | None = None
    retired_after: int | None = None


class Signed:
    """Checks the signature headers of stored events against a set of keys; remembers the roots it
    has already checked (the other events of a batch share its signature)."""

    def __init__(self, keys: Mapping[str, SigningKey]) -> None:
        self.keys = dict(keys)
        self._checked: dict[tuple[str, str], bytes] = {}  # (key id, signature) -> the root it signs

    def signer_of(self, headers: Mapping[str, str] | None, data: bytes, stored_at: datetime, seq: int | None = None) -> SigningKey | None:
        """The key that signed the event (stored at ``seq``), None when it carries no signature; ``ValueError``
        saying why when the signature does not verify (or its key is unknown, or retired before the event was stored)."""
        signer = headers.get(SIGNER) if headers else None
        signature = headers.get(SIGNATURE) if headers else None
        proof = headers.get(PROOF) if headers else None
        if signer is None and signature is None and proof is None:
            return None
        if not (signer and signature and proof):
            raise ValueError(f"incomplete signature: needs {SIGNER}, {SIGNATURE} and {PROOF}")
        key = self.keys.get(signer)
        if key is None:
            raise ValueError(f"signed with key {signer}, which the key registry does not hold")
        if key.retired_after is not None and seq is not None:
            if seq > key.retired_after:
                raise ValueError(f"signed with key {signer} of {key.actor_id}, retired after sequence {key.retired_after}, before this one")
        elif key.retired_at is not None and stored_at > key.retired_at:
            raise ValueError(f"signed with key {signer} of {key.actor_id}, retired at {key.retired_at.isoformat()} before the event was stored")
        root = _root_of(hashlib.sha256(data).digest(), proof)
        if self._checked.get((signer, signature)) == root:
            return key
        version, _, encoded = signature.partition(".")
        if version != VERSION:
            raise ValueError(f"signature version {version!r} is not one this reader knows ({VERSION})")
        try:
            key.public_key.verify(_unb64(encoded), _CONTEXT + root)
        except (InvalidSignature, ValueError):
            raise ValueError(f"the signature by key {signer} of {key.actor_id} does not verify over the stored bytes") from None
        if len(self._checked) > 4096:
            self._checked.clear()
        self._checked[(signer, signature)] = root
        return key


def _root_of(event_hash: bytes, proof: str) -> bytes:
    place, _, path = proof.partition(";")
    try:
        index, count = (int(part) for part in place.split("/"))
        siblings = [_unb64(part) for part in path.split(",")] if path else []
        if any(len(s) != 32 for s in siblings):
            raise ValueError("a hash of the proof is not 32 bytes")
        return root_from(event_hash, index, count, siblings)
    except ValueError as error:
        raise ValueError(f"malformed {PROOF} {proof[:80]!r}: {error}") from None


def signature_headers(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """The signature headers of a stored message (None when it has none), as readers keep them."""
    if not headers:
        return None
    signature, signer = headers.get(SIGNATURE), headers.get(SIGNER)
    if signature is None and signer is None:
        return None
    found = {SIGNER: signer, SIGNATURE: signature, PROOF: headers.get(PROOF)}
    return {name: value for name, value in found.items() if value is not None}


class Unsigned(ValueError):
    """An event with no signature stored after signatures became required."""


class Attribution:
    """Who vouched for a stored event, and whether it may speak for its actor.

    A key signs for its own actor; a delegate key (the API's) signs for the actors the API
    authenticates, which are never those holding keys of their own (direct producers speak only
    for themselves, and nobody speaks for them). Events stored up to ``required_after`` may be
    unsigned (stored before the registry signed anything); later ones must be signed."""

    def __init__(self, keys: Mapping[str, SigningKey], required_after: int | None) -> None:
        self.keys = dict(keys)
        self.required_after = required_after
        self._signed = Signed(self.keys)
        self._direct = {key.actor_id for key in self.keys.values() if not key.delegate}

    def check(self, seq: int, headers: Mapping[str, str] | None, data: bytes, stored_at: datetime, actor_id: str) -> SigningKey | None:
        """The key that vouches for the event; None for an unsigned event allowed where it is stored.
        ``Unsigned`` or ``ValueError`` says why it is not attributable."""
        key = self._signed.signer_of(headers, data, stored_at, seq)
        if key is None:
            if self.required_after is not None and seq > self.required_after:
                raise Unsigned(f"unsigned, and every event after sequence {self.required_after} must be signed")
            return None
        if key.actor_id == actor_id:
            return key
        if not key.delegate:
            raise ValueError(f"signed by {key.actor_id} (key {key.key_id}), which may sign only for itself, not for {actor_id}")
        if actor_id in self._direct:
            raise ValueError(f"signed by delegate {key.actor_id} for {actor_id}, a direct producer that signs for itself")
        return key


_DOCUMENT_CONTEXT = b"claimlog/document/v1\x00"  # apart from events' context: a signed document is never an event


def sign_document(signer: Signer, data: bytes) -> dict[str, str]:
    """A signature over a whole document (a backup's manifest): the key's id and the signature."""
    return {"key_id": signer.key_id, "signature": f"{VERSION}.{_b64(signer.private_key.sign(_DOCUMENT_CONTEXT + data))}"}


def document_signed_by(public_key: Ed25519PublicKey, data: bytes, signature: str) -> bool:
    """Whether ``signature`` (as ``sign_document`` writes it) is ``public_key``'s over ``data``."""
    version, _, encoded = signature.partition(".")
    try:
        public_key.verify(_unb64(encoded), _DOCUMENT_CONTEXT + data)
    except (InvalidSignature, ValueError):
        return False
    return version == VERSION
