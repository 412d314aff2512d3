"""The key registry's changes as facts of the log: which key spoke for whom, and from when to when.

The key registry (``services/identity/keys.py``) keeps its document in a bucket that the admin credential
can change unseen; the log is what the transparency log commits to. So every change is first appended
to the claim stream, on the registry's own subject (``<prefix>._registry.<Type>``: ``events.subjects``
reserves the token, which no claim id can take), and the bucket is a cache of what these events say.
Anyone holding only the log's entries folds them (``fold_registry``, pure) into the registry's keys and
signing requirement, and judges every signature as the registry's own gate does.

Registry changes are not claim events: no projection folds them, and no reader counts them as refused.
Their stored bytes chain like a claim's (``prev_hash``: the SHA-256 of the registry's previous change).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from events.envelope import EVENT_ID_PATTERN, HASH_PATTERN, Actor, UtcDateTime

KeyId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
PublicKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{43}$")]  # URL-safe base64 of 32 raw bytes, unpadded


class RegistryChange(BaseModel):
    """Base of every key-registry change: what every change carries."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    event_id: Annotated[str, StringConstraints(pattern=EVENT_ID_PATTERN)]
    type: str
    schema_version: int = Field(default=1, ge=1)
    occurred_at: UtcDateTime
    prev_hash: str | None = Field(
        default=None, pattern=HASH_PATTERN, description="SHA-256 of the stored bytes of the registry's previous change; None for its first."
    )


class KeyAdded(RegistryChange):
    """A public key was registered for an actor (a delegate signs for the actors the API authenticates)."""

    type: Literal["KeyAdded"] = "KeyAdded"
    key_id: KeyId
    actor: Actor
    public_key: PublicKey
    delegate: bool = False


class KeyRetired(RegistryChange):
    """A key was retired: it verifies the events stored up to ``retired_after`` and no later one (a rotation
    adds the new key first). ``retired_after`` is absent only for a key retired before registries kept it."""

    type: Literal["KeyRetired"] = "KeyRetired"
    key_id: KeyId
    retired_after: int | None = Field(default=None, ge=0)


class SigningRequired(RegistryChange):
    """Every event stored after ``required_after`` must be signed (set once, never moved)."""

    type: Literal["SigningRequired"] = "SigningRequired"
    required_after: int = Field(ge=0)


class RegisteredKey(BaseModel):
    """One key as the registry holds it: whose, whether a delegate, and when it was current."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key_id: KeyId
    actor: Actor
    public_key: PublicKey
    delegate: bool = False
    added_at: UtcDateTime
    retired_at: UtcDateTime | None = None
    retired_after: int | None = Field(default=None, ge=0)


class RegistryRecorded(RegistryChange):
    """The whole registry as its bucket held it when the log began to keep its changes: recorded once, as
    the first change of a registry made before, and only then."""

    type: Literal["RegistryRecorded"] = "RegistryRecorded"
    keys: list[RegisteredKey] = []
    required_after: int | None = Field(default=None, ge=0)
    required_set_at: UtcDateTime | None = None


REGISTRY_CLASSES = (KeyAdded, KeyRetired, SigningRequired, RegistryRecorded)
REGISTRY_TYPES: dict[str, type[RegistryChange]] = {cls.model_fields["type"].default: cls for cls in REGISTRY_CLASSES}
AnyRegistryChange = Annotated[Union[REGISTRY_CLASSES], Field(discriminator="type")]  # noqa: UP007
_ADAPTER: TypeAdapter[RegistryChange] = TypeAdapter(AnyRegistryChange)


class RegistryChangeError(ValueError):
    """Bytes that are not a registry change, or a change that does not follow from the ones before it."""


def decode_change(data: bytes) -> RegistryChange:
    """A registry change from its stored bytes; ``RegistryChangeError`` says why not."""
    try:
        raw: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise RegistryChangeError(f"not JSON: {error}") from None
    if not isinstance(raw, dict) or raw.get("type") not in REGISTRY_TYPES:
        raise RegistryChangeError(f"not a registry change: type {raw.get('type') if isinstance(raw, dict) else None!r}")
    if raw.get("schema_version", 1) != 1:
        raise RegistryChangeError(f"{raw['type']} version {raw.get('schema_version')!r}: this reader knows version 1")
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as error:
        raise RegistryChangeError(f"{raw['type']}: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}") from None


def encode_change(change: RegistryChange) -> bytes:
    """The stored bytes of a change."""
    return change.model_dump_json(exclude_none=True).encode()


class RegistryState(BaseModel):
    """The registry a fold of its changes gives: every key ever added (oldest first) and the requirement."""

    model_config = ConfigDict(frozen=True)

    keys: tuple[RegisteredKey, ...] = ()
    required_after: int | None = None
    required_set_at: datetime | None = None


def apply_change(state: RegistryState, change: RegistryChange) -> RegistryState:
    """The registry after ``change``; ``RegistryChangeError`` for a change that contradicts it."""
    if isinstance(change, RegistryRecorded):
        if state.keys or state.required_after is not None:
            raise RegistryChangeError("RegistryRecorded after other changes: it is only ever a registry's first change")
        return RegistryState(keys=tuple(change.keys), required_after=change.required_after, required_set_at=change.required_set_at)
    if isinstance(change, KeyAdded):
        if any(key.key_id == change.key_id for key in state.keys):
            raise RegistryChangeError(f"KeyAdded: key {change.key_id} is already registered")
        added = RegisteredKey(key_id=change.key_id, actor=change.actor, public_key=change.public_key,
                              delegate=change.delegate, added_at=change.occurred_at)
        return state.model_copy(update={"keys": (*state.keys, added)})
    if isinstance(change, KeyRetired):
        if not any(key.key_id == change.key_id and key.retired_at is None for key in state.keys):
            raise RegistryChangeError(f"KeyRetired: key {change.key_id} is not a current key of the registry")
        retired = tuple(
            key.model_copy(update={"retired_at": change.occurred_at, "retired_after": change.retired_after})
            if key.key_id == change.key_id else key
            for key in state.keys
        )
        return state.model_copy(update={"keys": retired})
    if isinstance(change, SigningRequired):
        if state.required_after is not None:
            raise RegistryChangeError(f"SigningRequired: signatures are already required after {state.required_after}")
        return state.model_copy(update={"required_after": change.required_after, "required_set_at": change.occurred_at})
    raise RegistryChangeError(f"{type(change).__name__} is not a registry change")


def fold_registry(changes: Iterable[RegistryChange]) -> RegistryState:
    """The registry the changes give, in log order (no changes: no keys, nothing required)."""
    state = RegistryState()
    for change in changes:
        state = apply_change(state, change)
    return state
