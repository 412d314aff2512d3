"""The public keys events are signed with: the actor registry's public half, a key-value bucket of its
own beside the token store (services/actors.py), so that every role may read the keys without
reading the token records.

One key, ``keys``, holds a ``KeyDocument``: every key ever added (``KeyRecord``), and the log sequence
after which every event must be signed. Nothing is removed: rotating adds the new key and sets the old
one's ``retired_at``, so every key that ever signed an event still verifies the events stored while it
was current (the bucket keeps the document's earlier revisions too).

Events stored up to the requirement (before the registry signed anything) are reported as unsigned,
not forged, and still fold; an unsigned event after it is never folded. It is set once, by
``claimlog actors key require`` (docs/security.md#the-signing-requirement).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime

from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict

from events import Actor
from events.envelope import utc_now
from events.subjects import DEFAULT_STREAM
from services.log.names import KEYS, keys_bucket
from services.log.replication import ensure_bucket_replicas, placed
from services.log.signing import SIGNER, Attribution, Signer, SigningKey, public_from_text, public_text

BUCKET = KEYS  # the default stream's; another stream's registry has a bucket of its own
DOCUMENT = "keys"


class KeyRecord(BaseModel):
    """One public key: whose, whether it may sign for the actors the API authenticates, and when it
    was current."""

    model_config = ConfigDict(frozen=True)

    key_id: str
    actor: Actor
    public_key: str  # URL-safe base64 of the raw 32 bytes
    delegate: bool = False
    added_at: datetime
    retired_at: datetime | None = None

    def signing_key(self) -> SigningKey:
        return SigningKey(self.key_id, self.actor.id, public_from_text(self.public_key), self.delegate, self.added_at, self.retired_at)


class KeyDocument(BaseModel):
    """The whole registry of keys, read in one get (any role may: no listing of a bucket needed) and
    written by compare-and-set on its revision."""

    model_config = ConfigDict(frozen=True)

    keys: list[KeyRecord] = []
    required_after: int | None = None  # every event after this log sequence must be signed
    required_set_at: datetime | None = None


class KeyRegistryError(ValueError):
    """A key operation that cannot be done: says what and why."""


class KeyRing:
    """Add, rotate and list signing keys; the requirement to sign."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, nc: Client, *, replicas: int = 1, stream: str = DEFAULT_STREAM) -> KeyRing:
        """The key ring of the registry on ``stream``, its bucket made when missing (needs admin rights)."""
        bucket = keys_bucket(stream)
        try:
            kv = await nc.jetstream().key_value(bucket)
        except (BucketNotFoundError, NotFoundError):
            config = KeyValueConfig(
                bucket=bucket, history=16, storage=StorageType.FILE, replicas=replicas, direct=True,
                description="claimlog signing keys (public) and the signing requirement",
            )
            kv = await placed(lambda: nc.jetstream().create_key_value(config), what=f"the key registry (bucket {bucket})", wanted=replicas)
        else:
            await ensure_bucket_replicas(nc, {bucket: "the key registry"}, replicas)
        return cls(kv)

    @classmethod
    async def maybe_open(cls, nc: Client, *, stream: str = DEFAULT_STREAM) -> KeyRing | None:
        """The key ring, or None when the registry has no key bucket yet (nothing signed, nothing required)."""
        try:
            return cls(await nc.jetstream().key_value(keys_bucket(stream)))
        except (BucketNotFoundError, NotFoundError):
            return None

    async def _load(self) -> tuple[KeyDocument, int]:
        try:
            entry = await self._kv.get(DOCUMENT)
        except (KeyNotFoundError, NotFoundError):
            return KeyDocument(), 0
        return KeyDocument.model_validate_json(entry.value or b"{}"), entry.revision or 0

    async def _save(self, document: KeyDocument, revision: int) -> None:
        """Write the document only if nobody wrote it since it was read at ``revision``."""
        data = document.model_dump_json().encode()
        try:
            if revision:
                await self._kv.update(DOCUMENT, data, last=revision)
            else:
                await self._kv.create(DOCUMENT, data)
        except KeyWrongLastSequenceError:
            raise KeyRegistryError("the key registry changed meanwhile (another operator?): try again") from None

    async def add(self, actor: Actor, *, delegate: bool = False, signer: Signer | None = None) -> tuple[Signer, KeyRecord]:
        """A new key for ``actor`` (generated unless given): the signer (its private key, kept by the
        caller only) and the record the registry keeps."""
        signer = signer or Signer.generate()
        document, revision = await self._load()
        for record in document.keys:
            if record.key_id == signer.key_id:
                raise KeyRegistryError(f"key {signer.key_id} is already registered (to {record.actor.id})")
            if record.actor.id == actor.id and record.actor != actor:
                raise KeyRegistryError(f"{actor.id} holds keys as {record.actor.kind.value}; an actor's kind never changes")
            if record.actor.id == actor.id and record.delegate != delegate:
                raise KeyRegistryError(f"{actor.id} holds keys with delegate={record.delegate}; a signer's role never changes")
        record = KeyRecord(key_id=signer.key_id, actor=actor, public_key=public_text(signer.public_key), delegate=delegate, added_at=utc_now())
        await self._save(document.model_copy(update={"keys": [*document.keys, record]}), revision)
        return signer, record

    async def rotate(self, actor_id: str) -> tuple[Signer, KeyRecord, list[KeyRecord]]:
        """A new key for ``actor_id`` in place of its current ones, which are retired (they keep
        verifying the events stored before now)."""
        document, revision = await self._load()
        current = [r for r in document.keys if r.actor.id == actor_id and r.retired_at is None]
        if not current:
            raise KeyRegistryError(f"{actor_id} has no current key to rotate: add one with `claimlog actors key add`")
        signer = Signer.generate()
        now = utc_now()
        record = KeyRecord(key_id=signer.key_id, actor=current[0].actor, public_key=public_text(signer.public_key),
                           delegate=current[0].delegate, added_at=now)
        kept = [r.model_copy(update={"retired_at": now}) if r in current else r for r in document.keys]
        await self._save(document.model_copy(update={"keys": [*kept, record]}), revision)
        return signer, record, [r for r in kept if r.key_id in {c.key_id for c in current}]

    async def records(self) -> list[KeyRecord]:
        """Every key ever added, oldest first."""
        return list((await self._load())[0].keys)

    async def requirement(self) -> int | None:
        """The sequence after which every event must be signed, or None while none is required."""
        return (await self._load())[0].required_after

    async def attribution(self) -> Attribution:
        """Everything a reader needs to check who vouched for each event (one read of the registry)."""
        document, _ = await self._load()
        return Attribution({r.key_id: r.signing_key() for r in document.keys}, document.required_after)

    async def require(self, after_seq: int) -> KeyDocument:
        """Every event stored after ``after_seq`` must be signed from now on (set once: never moved)."""
        document, revision = await self._load()
        if document.required_after is not None:
            raise KeyRegistryError(
                f"signatures are already required after sequence {document.required_after} (set {document.required_set_at})"
            )
        if not any(record.retired_at is None for record in document.keys):
            raise KeyRegistryError("no current signing key: add the API's key (and any direct producer's) before requiring signatures")
        updated = document.model_copy(update={"required_after": after_seq, "required_set_at": utc_now()})
        await self._save(updated, revision)
        return updated


async def load_attribution(nc: Client, *, stream: str = DEFAULT_STREAM) -> Attribution:
    """The registry's keys and requirement as a reader checks events with (no keys: nothing required)."""
    ring = await KeyRing.maybe_open(nc, stream=stream)
    return Attribution({}, None) if ring is None else await ring.attribution()


class AttributionCache:
    """The keys and requirement a projector checks events with, read again before a batch that needs it:
    one naming a key not yet known, one holding an unsigned event while no requirement is known (it may
    have been set since), or after ``REFRESH`` seconds (a key retired since). One read is one get."""

    REFRESH = 5.0

    def __init__(self, load: Callable[[], Awaitable[Attribution]]) -> None:
        self._load = load
        self._attribution: Attribution | None = None
        self._loaded_at = 0.0

    async def current(self, headers: Iterable[Mapping[str, str] | None]) -> Attribution:
        attribution = self._attribution
        if attribution is None or time.monotonic() - self._loaded_at > self.REFRESH or _news(attribution, headers):
            self._attribution = attribution = await self._load()
            self._loaded_at = time.monotonic()
        return attribution


def _news(attribution: Attribution, headers: Iterable[Mapping[str, str] | None]) -> bool:
    for header in headers:
        signer = header.get(SIGNER) if header else None
        if signer is None:
            if attribution.required_after is None:
                return True
        elif signer not in attribution.keys:
            return True
    return False
