"""Actors and their bearer tokens, kept in a JetStream key-value bucket next to the log.

A token is shown once, when it is made; the bucket keeps only its SHA-256 (tokens are 256 random
bits, so a fast hash is enough: there is nothing to guess). A request's token is hashed, looked
up, and compared in constant time; a revoked token stops working at the next request, because
every request reads the bucket (one direct get, well under a millisecond on loopback). A token may
carry an expiry: past it, the token is refused with ``TokenExpired``, which says when; records made
before expiries existed have none and never expire.

Keys: ``token.<sha256 of the token>`` -> ``TokenRecord`` as JSON. Nothing is deleted: revoking
writes the record again with ``revoked_at`` set, rotating writes the old tokens again with an earlier
``expires_at`` (or revoked, without a grace period), and the bucket keeps the history.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import (
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
)
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict

from events import Actor
from events.envelope import utc_now
from events.subjects import DEFAULT_STREAM
from services.identity.expiry import stamp
from services.log.buckets import bucket_keys, find_bucket, open_bucket
from services.log.names import ACTORS, actors_bucket
from services.log.replication import ensure_bucket_replicas

BUCKET = ACTORS  # the default stream's; another stream's registry has a bucket of its own
TOKEN_PREFIX = "clm_"


class TokenRecord(BaseModel):
    """One token: whose it is, when it was made, when it expires (None: never), whether it was revoked."""

    model_config = ConfigDict(frozen=True)

    token_id: str  # the first 12 hex digits of the hash: safe to show, enough to name a token
    actor: Actor
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the token's expiry has come by ``now`` (a token without one never expires)."""
        return self.expires_at is not None and self.expires_at <= now

    def live(self, now: datetime) -> bool:
        """Whether the token still works at ``now``: neither revoked nor expired."""
        return self.revoked_at is None and not self.expired(now)


class ActorKindFixed(ValueError):
    """A token asked for an existing actor id with another kind: an actor's kind never changes."""


class TokenExpired(Exception):
    """A known token past its expiry: refused, with when it expired, so its holder knows to ask for a new one."""

    def __init__(self, record: TokenRecord) -> None:
        self.record = record
        super().__init__(
            f"the bearer token {record.token_id} expired at {stamp(record.expires_at or record.created_at)}: "
            f"ask for a new one (`claimlog actors rotate {record.actor.id}` issues it)"
        )


class NoLiveToken(LookupError):
    """``rotate`` named an actor with no token that still works: nothing to rotate."""


class ActorsUnavailable(RuntimeError):
    """The actors bucket does not exist yet: no actor has been added."""


async def ensure_store_replicas(nc: Client, replicas: int, *, stream: str = DEFAULT_STREAM) -> None:
    """Raise the token store's replicas to ``replicas``, when it exists (``actors add`` creates it)."""
    await ensure_bucket_replicas(nc, {actors_bucket(stream): "the token store"}, replicas)


def token_hash(token: str) -> str:
    """The SHA-256 of a token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


class ActorStore:
    """Issue, look up, list and revoke tokens."""

    def __init__(self, kv: KeyValue, js: JetStreamContext, bucket: str) -> None:
        self._kv, self._js, self._bucket = kv, js, bucket

    @classmethod
    async def open(
        cls, nc: Client, *, create: bool = False, replicas: int = 1, stream: str = DEFAULT_STREAM
    ) -> ActorStore:
        """The store of the registry on ``stream``; ``create`` makes its bucket with ``replicas`` copies when
        missing, or raises an existing one's to them (needs admin rights)."""
        js, bucket = nc.jetstream(), actors_bucket(stream)
        kv = await find_bucket(js, ACTORS, stream=stream)
        if kv is None:
            if not create:
                raise ActorsUnavailable(
                    f"no actors yet (the key-value bucket {bucket} does not exist): add one with `claimlog actors add`"
                )
            return cls(await open_bucket(js, ACTORS, stream=stream, replicas=replicas), js, bucket)
        if create:
            await ensure_store_replicas(nc, replicas, stream=stream)
        return cls(kv, js, bucket)

    async def issue(self, actor: Actor, *, expires_at: datetime | None = None) -> tuple[str, TokenRecord]:
        """A new token for ``actor``, working until ``expires_at`` (None: until revoked): the token itself
        (shown once) and its record.

        An actor's kind is fixed by its first token (revoked or not): the review rules tell a person from a
        model by it, so one id must not be both. ``ActorKindFixed`` says so.
        """
        for _, record in await self.records():
            if record.actor.id == actor.id and record.actor.kind is not actor.kind:
                raise ActorKindFixed(
                    f"actor {actor.id!r} is a {record.actor.kind.value} (token {record.token_id}, made "
                    f"{record.created_at:%Y-%m-%d}): an actor's kind never changes; add the {actor.kind.value} "
                    "under another id"
                )
        return await self._create(actor, expires_at=expires_at, now=utc_now())

    async def _create(self, actor: Actor, *, expires_at: datetime | None, now: datetime) -> tuple[str, TokenRecord]:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        digest = token_hash(token)
        record = TokenRecord(token_id=digest[:12], actor=actor, created_at=now, expires_at=expires_at)
        await self._kv.create(f"token.{digest}", record.model_dump_json().encode())
        return token, record

    async def authenticate(self, token: str, *, now: datetime | None = None) -> Actor | None:
        """The actor a token belongs to, or None when it is unknown or revoked; ``TokenExpired`` past its expiry."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 100:
            return None
        digest = token_hash(token)
        try:
            entry = await self._kv.get(f"token.{digest}")
        except (KeyNotFoundError, NotFoundError):
            return None
        record = TokenRecord.model_validate_json(entry.value or b"{}")
        if not hmac.compare_digest(record.token_id, digest[:12]) or record.revoked_at is not None:
            return None
        if record.expired(now or utc_now()):
            raise TokenExpired(record)
        return record.actor

    async def records(self) -> list[tuple[str, TokenRecord]]:
        """Every token's key and record (for operators, and what ``revoke`` and ``rotate`` look through)."""
        found = []
        for key in await bucket_keys(self._js, self._bucket, "token."):
            try:
                entry = await self._kv.get(key)
            except (KeyNotFoundError, NotFoundError):
                continue  # deleted by hand
            found.append((key, TokenRecord.model_validate_json(entry.value or b"{}")))
        return sorted(found, key=lambda item: item[1].created_at)

    async def revoke(self, *, actor_id: str | None = None, token_id: str | None = None) -> list[TokenRecord]:
        """Revoke every live token of an actor, or one token by its id; returns what was revoked."""
        revoked = []
        now = utc_now()
        for key, record in await self.records():
            matches = record.actor.id == actor_id if actor_id is not None else record.token_id == token_id
            if matches and record.revoked_at is None:
                updated = record.model_copy(update={"revoked_at": now})
                await self._kv.put(key, updated.model_dump_json().encode())
                revoked.append(updated)
        return revoked

    async def rotate(
        self, actor_id: str, *, expires_at: datetime | None = None, grace: timedelta = timedelta(0)
    ) -> tuple[str, TokenRecord, list[TokenRecord]]:
        """A new token for an actor (the same kind and model as its newest live token), and its live tokens
        made to expire after ``grace`` (revoked at once without one): the token, its record, the old records.

        The new token is stored before any old one is cut short, so the actor is never left without one.
        Each old record is written only over the revision it was read at: a revocation made meanwhile stands.
        """
        now = utc_now()
        mine = [(key, record) for key, record in await self.records() if record.actor.id == actor_id]
        live = [(key, record) for key, record in mine if record.live(now)]
        if not live:
            raise NoLiveToken(_nothing_to_rotate(actor_id, mine))
        token, record = await self._create(live[-1][1].actor, expires_at=expires_at, now=now)
        old = [cut for key, _ in live if (cut := await self._cut_short(key, now=now, grace=grace)) is not None]
        return token, record, old

    async def _cut_short(self, key: str, *, now: datetime, grace: timedelta) -> TokenRecord | None:
        """A live token written again to expire after ``grace`` (revoked without one); None if it is no longer live."""
        while True:
            entry = await self._kv.get(key)
            record = TokenRecord.model_validate_json(entry.value or b"{}")
            if not record.live(now):
                return None
            cutoff = now + grace
            update = {"expires_at": min(record.expires_at or cutoff, cutoff)} if grace else {"revoked_at": now}
            updated = record.model_copy(update=update)
            try:
                await self._kv.update(key, updated.model_dump_json().encode(), last=entry.revision)
            except KeyWrongLastSequenceError:
                continue  # written meanwhile: read it again
            return updated


def _nothing_to_rotate(actor_id: str, records: list[tuple[str, TokenRecord]]) -> str:
    if not records:
        return (f"no actor {actor_id!r}: `claimlog actors list` shows every actor; "
                f"`claimlog actors add {actor_id} --kind person|model|service` adds one")
    actor = records[-1][1].actor
    model = f" --model {actor.model!r}" if actor.model else ""
    return (f"actor {actor_id!r} has no live token to rotate (each one is revoked or expired; `claimlog actors list` "
            f"shows them): `claimlog actors add {actor_id} --kind {actor.kind.value}{model}` issues a new one")
