"""The public keys events are signed with: the actor registry's public half, a key-value bucket of its
own beside the token store (services/identity/actors.py), so that every role may read the keys without
reading the token records.

The log says which key spoke for whom when: every change (a key added, retired, the requirement set) is
first appended to the claim stream as a registry change (events/key_registry.py), and only then written
to the bucket, whose one key, ``keys``, holds the ``KeyDocument`` those changes give: every key ever added
(``KeyRecord``), and the log sequence after which every event must be signed. The bucket is a cache every
reader's gate reads in one get; ``claimlog verify`` names a bucket that differs from the log. Nothing is removed: rotating adds the new key and retires the
old one after the log's head then (``retired_after``, with ``retired_at`` for people), so every key that
ever signed an event still verifies the events stored up to that sequence (the bucket keeps the
document's earlier revisions too). Currency is judged by the log's sequence, which no publisher sets,
never by a store time, which an import (or a publisher) does.

Events stored up to the requirement (before the registry signed anything) are reported as unsigned,
not forged, and still fold; an unsigned event after it is never folded. It is set once, by
``claimlog actors key require`` (docs/security.md#the-signing-requirement).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime

import nats.errors
from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict

from events import Actor, new_event_id
from events.envelope import utc_now
from events.key_registry import (
    KeyAdded,
    KeyRetired,
    RegisteredKey,
    RegistryChange,
    RegistryRecorded,
    RegistryState,
    SigningRequired,
    fold_registry,
)
from events.subjects import DEFAULT_LAYOUT, DEFAULT_STREAM, LogLayout
from services.log.buckets import KINDS, find_bucket, open_bucket
from services.log.errors import ConflictError
from services.log.names import KEYS, keys_bucket
from services.log.registry_log import RegistryLog, append_changes, read_registry
from services.log.replication import ensure_bucket_replicas
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
    retired_after: int | None = None  # the last log sequence it verifies: a key's currency is the log's, not a clock's

    def signing_key(self) -> SigningKey:
        return SigningKey(
            self.key_id, self.actor.id, public_from_text(self.public_key), self.delegate, self.added_at, self.retired_at, self.retired_after
        )


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
    """Add, rotate and list signing keys; the requirement to sign.

    Every change is appended to the log first (events/key_registry.py, on the registry's reserved subject,
    expecting the registry's last change: of two admins at once, one is refused), then the bucket is
    written with what the log's changes give: the bucket is a cache of the log, which readers' gates read
    in one get. A registry made before the log kept its changes has its bucket's document recorded in the
    log once, as its first change (``record_if_missing``)."""

    def __init__(self, kv: KeyValue, nc: Client | None = None, *, stream: str = DEFAULT_STREAM, layout: LogLayout = DEFAULT_LAYOUT) -> None:
        self._kv, self._nc, self._stream, self._layout = kv, nc, stream, layout

    @classmethod
    async def open(cls, nc: Client, *, replicas: int = 1, stream: str = DEFAULT_STREAM, layout: LogLayout = DEFAULT_LAYOUT) -> KeyRing:
        """The key ring of the registry on ``stream``, its bucket made when missing (needs admin rights)."""
        found = await find_bucket(nc.jetstream(), KEYS, stream=stream)
        if found is None:
            return cls(await open_bucket(nc.jetstream(), KEYS, stream=stream, replicas=replicas), nc, stream=stream, layout=layout)
        await ensure_bucket_replicas(nc, {keys_bucket(stream): KINDS[KEYS].what}, replicas)
        return cls(found, nc, stream=stream, layout=layout)

    @classmethod
    async def maybe_open(cls, nc: Client, *, stream: str = DEFAULT_STREAM, layout: LogLayout = DEFAULT_LAYOUT) -> KeyRing | None:
        """The key ring, or None when the registry has no key bucket yet (nothing signed, nothing required)."""
        found = await find_bucket(nc.jetstream(), KEYS, stream=stream)
        return None if found is None else cls(found, nc, stream=stream, layout=layout)

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

    async def logged(self) -> tuple[RegistryLog, KeyDocument]:
        """The registry's changes as the log holds them, and the document they give."""
        if self._nc is None:
            raise KeyRegistryError("this key ring has no log connection to read the registry's changes from")
        log = await read_registry(self._nc, self._stream, layout=self._layout)
        return log, document_of(fold_registry(log.changes))

    async def _change(self, decide: Callable[[KeyDocument], list[RegistryChange]]) -> KeyDocument:
        """Append the changes ``decide`` makes of the registry as the log gives it, then cache the result."""
        log, document = await self.logged()
        first: list[RegistryChange] = []
        if not log.changes:
            cached, _ = await self._load()
            if cached != KeyDocument():  # a registry made before the log kept its changes: its document first
                document, first = cached, [recorded(cached)]
        changes = [*first, *decide(document)]
        try:
            await append_changes(self._nc, self._stream, changes, after=log, layout=self._layout)
        except ConflictError:
            raise KeyRegistryError("the key registry changed meanwhile (another operator?): try again") from None
        return await self.sync()

    async def sync(self) -> KeyDocument:
        """Write into the bucket what the log's changes give (a cache written by compare-and-set, so a late
        writer never puts back an older document), and return it."""
        for _ in range(5):
            log, document = await self.logged()
            cached, revision = await self._load()
            if not log.changes or cached == document:  # a log without changes says nothing yet (record_if_missing)
                return cached
            with contextlib.suppress(KeyRegistryError):
                await self._save(document, revision)
                return document
        raise KeyRegistryError("the key registry's bucket kept changing while it was written: try again")

    async def record_if_missing(self) -> KeyDocument | None:
        """Record the bucket's document in the log when the bucket holds keys or a requirement and the log no
        change (a registry made before the log kept them); the document recorded, or None when nothing was."""
        log, _ = await self.logged()
        cached, _ = await self._load()
        if log.changes or cached == KeyDocument():
            return None
        try:
            await append_changes(self._nc, self._stream, [recorded(cached)], after=log, layout=self._layout)
        except ConflictError:
            return None  # another process recorded it (or changed the registry) first
        await self.sync()
        return cached

    async def add(self, actor: Actor, *, delegate: bool = False, signer: Signer | None = None) -> tuple[Signer, KeyRecord]:
        """A new key for ``actor`` (generated unless given): the signer (its private key, kept by the
        caller only) and the record the registry keeps."""
        signer = signer or Signer.generate()

        def decide(document: KeyDocument) -> list[RegistryChange]:
            for record in document.keys:
                if record.key_id == signer.key_id:
                    raise KeyRegistryError(f"key {signer.key_id} is already registered (to {record.actor.id})")
                if record.actor.id == actor.id and record.actor != actor:
                    raise KeyRegistryError(f"{actor.id} holds keys as {record.actor.kind.value}; an actor's kind never changes")
                if record.actor.id == actor.id and record.delegate != delegate:
                    raise KeyRegistryError(f"{actor.id} holds keys with delegate={record.delegate}; a signer's role never changes")
            return [KeyAdded(event_id=new_event_id(), occurred_at=utc_now(), key_id=signer.key_id, actor=actor,
                             public_key=public_text(signer.public_key), delegate=delegate)]

        document = await self._change(decide)
        return signer, next(r for r in document.keys if r.key_id == signer.key_id)

    async def rotate(self, actor_id: str, *, after_seq: int) -> tuple[Signer, KeyRecord, list[KeyRecord]]:
        """A new key for ``actor_id`` in place of its current ones, which are retired after log sequence
        ``after_seq`` (the log's head now: they keep verifying the events stored up to it, and no later one)."""
        signer = Signer.generate()
        retiring: list[str] = []

        def decide(document: KeyDocument) -> list[RegistryChange]:
            current = [r for r in document.keys if r.actor.id == actor_id and r.retired_at is None]
            if not current:
                raise KeyRegistryError(f"{actor_id} has no current key to rotate: add one with `claimlog actors key add`")
            now = utc_now()
            retiring[:] = [r.key_id for r in current]
            added = KeyAdded(event_id=new_event_id(), occurred_at=now, key_id=signer.key_id, actor=current[0].actor,
                             public_key=public_text(signer.public_key), delegate=current[0].delegate)
            return [added, *(KeyRetired(event_id=new_event_id(), occurred_at=now, key_id=r.key_id, retired_after=after_seq) for r in current)]

        document = await self._change(decide)
        record = next(r for r in document.keys if r.key_id == signer.key_id)
        return signer, record, [r for r in document.keys if r.key_id in retiring]

    async def document(self) -> KeyDocument:
        """The whole registry as its bucket holds it now: every key and the requirement."""
        return (await self._load())[0]

    async def records(self) -> list[KeyRecord]:
        """Every key ever added, oldest first."""
        return list((await self._load())[0].keys)

    async def requirement(self) -> int | None:
        """The sequence after which every event must be signed, or None while none is required."""
        return (await self._load())[0].required_after

    async def attribution(self) -> Attribution:
        """Everything a reader needs to check who vouched for each event (one read of the registry)."""
        return attribution_of((await self._load())[0])

    async def require(self, after_seq: int) -> KeyDocument:
        """Every event stored after ``after_seq`` must be signed from now on (set once: never moved)."""

        def decide(document: KeyDocument) -> list[RegistryChange]:
            if document.required_after is not None:
                raise KeyRegistryError(
                    f"signatures are already required after sequence {document.required_after} (set {document.required_set_at})"
                )
            if not any(record.retired_at is None for record in document.keys):
                raise KeyRegistryError("no current signing key: add the API's key (and any direct producer's) before requiring signatures")
            return [SigningRequired(event_id=new_event_id(), occurred_at=utc_now(), required_after=after_seq)]

        return await self._change(decide)


def document_of(state: RegistryState) -> KeyDocument:
    """The bucket's document a fold of the registry's changes gives (events/key_registry.py)."""
    keys = [KeyRecord.model_validate(key.model_dump()) for key in state.keys]
    return KeyDocument(keys=keys, required_after=state.required_after, required_set_at=state.required_set_at)


def attribution_of(document: KeyDocument) -> Attribution:
    """The keys and requirement a gate judges signatures with, as ``document`` gives them."""
    return Attribution({r.key_id: r.signing_key() for r in document.keys}, document.required_after)


def recorded(document: KeyDocument) -> RegistryRecorded:
    """The change that records a registry made before the log kept its changes, as its bucket holds it."""
    keys = [RegisteredKey.model_validate(record.model_dump()) for record in document.keys]
    return RegistryRecorded(event_id=new_event_id(), occurred_at=utc_now(), keys=keys,
                            required_after=document.required_after, required_set_at=document.required_set_at)


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


FORGERY_WARNING = (
    "signatures are not required: anyone holding a NATS publish credential can publish an event as any actor, "
    "and it folds as that actor's; run `claimlog actors key require` once the API's key (and every direct producer's) is in use"
)


async def signing_report(nc: Client, *, stream: str = DEFAULT_STREAM) -> dict:
    """Whether the registry requires signatures (after which sequence), how many keys are current, and, while
    none is required, the warning that forgery is possible (``/health``, ``claimlog status``, ``claimlog up``)."""
    try:
        ring = await KeyRing.maybe_open(nc, stream=stream)
        document = KeyDocument() if ring is None else await ring.document()
    except (nats.errors.Error, TimeoutError) as error:  # the bucket has no leader (a cluster without its majority)
        return {"unknown": f"the key registry did not answer ({type(error).__name__}: {error})"}
    report: dict = {
        "required_after": document.required_after,
        "current_keys": sum(1 for record in document.keys if record.retired_at is None),
    }
    if document.required_after is None:
        report["warning"] = FORGERY_WARNING
    return report
