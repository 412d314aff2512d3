"""Trust by default: a registry ``claimlog up`` starts signs from its first event.

At the first start of a registry whose key registry holds no key (and no key of the operator's own in
``CLAIMLOG_SIGNING_KEY``) ``claimlog up`` makes the registry's delegate key in the data directory
(services/runtime/registry_key.py) and registers its public half as the delegate of the API's service
actor; on an empty log it also requires a signature on every event after sequence 0. A registry that
already holds unsigned events keeps working as it did, its API signing from then on, and is told at
every start that forgery is possible until ``claimlog actors key require``. A key registry made before the
log kept its changes (keys in its bucket, none of its changes in the log) has its document recorded in the
log once, at the first start that finds it so, which says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from events import Actor, ActorKind
from services.identity.keys import KeyDocument, KeyRing
from services.log.signing import Signer
from services.runtime.from_settings import open_log, signing_key_file
from services.runtime.registry_key import API_ACTOR, registry_key_file, write_registry_key
from services.runtime.settings import Settings


@dataclass(frozen=True)
class Trust:
    """What the registry signs with and requires, as ``claimlog up`` found or made it."""

    key_file: Path | None  # the key the API signs with (None: it does not sign)
    required_after: int | None  # every event after this sequence must be signed (None: forgery possible)
    made: bool = False  # this start made the registry's delegate key and set the requirement
    recorded: int | None = None  # this start recorded a registry made before the log kept its changes (its key count)


async def ensure_trust(settings: Settings) -> Trust:
    """Make, register and require the registry's delegate key on a new registry; report what holds otherwise."""
    async with open_log(settings, client_name="claimlog-trust", role="admin") as claim_log:
        ring = await KeyRing.open(claim_log.nc, replicas=claim_log.spec.replicas, stream=claim_log.stream, layout=claim_log.layout)
        old = await ring.record_if_missing()  # a registry made before the log kept its changes: recorded once
        recorded = None if old is None else len(old.keys)
        document = await ring.document()
        head = await claim_log.head()
        key_file = signing_key_file(settings)
        new = head == 0 and document.required_after is None
        if key_file is None and not document.keys:  # a registry nobody has given a key: the API signs from now on
            key_file = registry_key_file(settings.data_dir, settings.stream)
            write_registry_key(key_file, Signer.generate())
        own = key_file is not None and key_file == registry_key_file(settings.data_dir, settings.stream)
        signer = None if key_file is None else Signer.from_file(key_file)
        if own and signer is not None and not _holds(document, signer.key_id):
            await ring.add(Actor(id=API_ACTOR, kind=ActorKind.SERVICE), delegate=True, signer=signer)
            document = await ring.document()
        if new and signer is not None and _current(document, signer.key_id):
            document = await ring.require(0)
            return Trust(key_file, document.required_after, made=own, recorded=recorded)
        return Trust(key_file, document.required_after, made=own and not document.required_after and head == 0, recorded=recorded)


def _holds(document: KeyDocument, key_id: str) -> bool:
    return any(record.key_id == key_id for record in document.keys)


def _current(document: KeyDocument, key_id: str) -> bool:
    return any(record.key_id == key_id and record.retired_at is None for record in document.keys)
