"""The key registry's changes in the claim stream: appended by the admin, read back in log order.

The changes go on ``<prefix>._registry.<Type>`` (events/subjects.py reserves the claim token), so the
registry's history is part of the log, its chain and its transparency tree. An append expects the
registry's last sequence (``Nats-Expected-Last-Subject-Sequence`` over every stored registry subject,
whatever its partition), so of two admins changing the registry at once one is refused and nothing of
its append is stored. Several changes of one append (a rotation: the new key, then the old ones
retired) are one atomic batch.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from nats.aio.client import Client

from events.key_registry import RegistryChange, decode_change, encode_change
from events.subjects import DEFAULT_LAYOUT, REGISTRY, LogLayout
from services.log.errors import ConflictError, PublishError
from services.log.reader import StoredEvent, read_claim
from services.log.writer import MESSAGE_ID_NAMESPACE, WRONG_LAST_SEQUENCE, request_ack


@dataclass(frozen=True)
class RegistryLog:
    """The registry's changes as the log holds them: each stored message and what it decoded to, in order."""

    stored: tuple[StoredEvent, ...]
    changes: tuple[RegistryChange, ...]

    @property
    def last_seq(self) -> int:
        """The sequence of the registry's last change (0: none yet), what the next append expects."""
        return self.stored[-1].seq if self.stored else 0

    @property
    def last_hash(self) -> str | None:
        return self.stored[-1].hash if self.stored else None


def registry_message_id(change: RegistryChange) -> str:
    """A change's ``Nats-Msg-Id``: derived from the reserved token and its event id, so a retry is stored once."""
    return str(uuid.uuid5(MESSAGE_ID_NAMESPACE, f"{REGISTRY}\x00{change.event_id}"))


async def read_registry(nc: Client, stream: str, *, layout: LogLayout = DEFAULT_LAYOUT, up_to_seq: int | None = None) -> RegistryLog:
    """Every registry change the log holds (up to ``up_to_seq``); a ``RegistryChangeError`` names one that does not decode."""
    stored = await read_claim(nc, stream, REGISTRY, layout=layout, up_to_seq=up_to_seq)
    return RegistryLog(tuple(stored), tuple(decode_change(s.data) for s in stored))


async def append_changes(
    nc: Client, stream: str, changes: Sequence[RegistryChange], *, after: RegistryLog, layout: LogLayout = DEFAULT_LAYOUT,
    timeout: float = 5.0,
) -> tuple[RegistryChange, ...]:
    """Append ``changes`` after the registry's last change as ``after`` read it, chained to it, all or none;
    ``ConflictError`` when another change was appended since. The changes as stored (with ``prev_hash``)."""
    if not changes:
        raise ValueError("a registry append holds at least one change")
    prev_hash, linked = after.last_hash, []
    for change in changes:
        change = change.model_copy(update={"prev_hash": prev_hash})
        data = encode_change(change)
        linked.append((change, data))
        prev_hash = hashlib.sha256(data).hexdigest()
    headers = [{"Nats-Msg-Id": registry_message_id(change)} for change, _ in linked]
    headers[0]["Nats-Expected-Last-Subject-Sequence"] = str(after.last_seq)
    headers[0]["Nats-Expected-Last-Subject-Sequence-Subject"] = layout.claim_filter(REGISTRY)
    if len(linked) > 1:
        batch_id = uuid.uuid4().hex
        for number, header in enumerate(headers, start=1):
            header["Nats-Batch-Id"], header["Nats-Batch-Sequence"] = batch_id, str(number)
        headers[-1]["Nats-Batch-Commit"] = "1"
    messages = [(layout.registry_subject(change.type), data, header) for (change, data), header in zip(linked, headers, strict=True)]
    for subject, data, header in messages[:-1]:
        await nc.publish(subject, data, headers=header)
    subject, data, header = messages[-1]
    ack = await request_ack(nc, stream, subject, data, header, timeout)
    error = ack.get("error")
    if error is not None:
        if error.get("err_code") == WRONG_LAST_SEQUENCE:
            raise ConflictError(REGISTRY, after.last_seq, error.get("description", ""))
        raise PublishError(f"JetStream refused the key registry's change: {error.get('description')} (err_code {error.get('err_code')})")
    return tuple(change for change, _ in linked)
