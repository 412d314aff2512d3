"""Appending events to a claim: message ids, the per-claim expected sequence, atomic batches, checked acks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError

from events import Event
from events.subjects import claim_filter, event_subject
from services.log.chain import chain, event_hash
from services.log.errors import ConflictError, PublishError
from services.log.reader import read_claim

WRONG_LAST_SEQUENCE = 10071
BATCH_DUPLICATE_MSG_ID = 10201
MAX_BATCH = 1000


@dataclass(frozen=True)
class Appended:
    """What the log acknowledged for one append."""

    claim_id: str
    first_seq: int | None  # None when JetStream deduplicated a retry without saying where the first copy is
    last_seq: int
    duplicate: bool  # a retry: the events were already stored, nothing new was written
    last_hash: str


async def append(
    nc: Client,
    stream: str,
    claim_id: str,
    events: Sequence[Event],
    *,
    expected_seq: int,
    prev_hash: str | None,
    timeout: float = 5.0,
) -> Appended:
    """Append events to one claim, all or nothing, only if its last event is still at ``expected_seq``."""
    if not events or len(events) > MAX_BATCH:
        raise ValueError(f"an append holds 1 to {MAX_BATCH} events, got {len(events)}")
    strangers = {e.claim_id for e in events} - {claim_id}
    if strangers:
        raise ValueError(f"append to {claim_id} holds events of other claims: {sorted(strangers)}")
    linked = chain(events, prev_hash)
    headers = [_headers(event) for event, _ in linked]
    headers[0]["Nats-Expected-Last-Subject-Sequence"] = str(expected_seq)
    headers[0]["Nats-Expected-Last-Subject-Sequence-Subject"] = claim_filter(claim_id)
    if len(linked) > 1:
        batch_id = uuid.uuid4().hex
        for number, header in enumerate(headers, start=1):
            header["Nats-Batch-Id"] = batch_id
            header["Nats-Batch-Sequence"] = str(number)
        headers[-1]["Nats-Batch-Commit"] = "1"
        for (event, data), header in zip(linked[:-1], headers[:-1], strict=True):
            await nc.publish(event_subject(claim_id, event.type), data, headers=header)
    last_event, last_data = linked[-1]
    ack = await _request(nc, event_subject(claim_id, last_event.type), last_data, headers[-1], timeout)
    try:
        return _appended(ack, claim_id, expected_seq, count=len(linked), last_hash=event_hash(last_data))
    except (ConflictError, _AlreadyStored) as refusal:
        retry = await _stored_before(nc, stream, claim_id, events, after_seq=expected_seq)
        if retry is None:
            if isinstance(refusal, ConflictError):
                raise
            raise PublishError(f"JetStream says the events for {claim_id} were stored, but they are not there") from None
        return retry


class _AlreadyStored(Exception):
    """An atomic batch whose message ids the stream has already seen."""


async def _stored_before(nc: Client, stream: str, claim_id: str, events: Sequence[Event], *, after_seq: int):
    """An earlier append of exactly these events (a retry), found by their message ids; None if absent."""
    wanted = [event.event_id for event in events]
    stored = [s for s in await read_claim(nc, stream, claim_id, after_seq=after_seq) if s.msg_id in set(wanted)]
    if [s.msg_id for s in stored] != wanted:
        return None
    return Appended(claim_id, stored[0].seq, stored[-1].seq, True, stored[-1].hash)


def _headers(event: Event) -> dict[str, str]:
    return {"Nats-Msg-Id": event.event_id}


async def _request(nc: Client, subject: str, data: bytes, headers: dict[str, str], timeout: float) -> dict:
    try:
        reply = await nc.request(subject, data, headers=headers, timeout=timeout)
    except NoRespondersError:
        raise PublishError(f"no stream stores {subject}: is the claim stream created?") from None
    except (NatsTimeoutError, TimeoutError):
        raise PublishError(
            f"no acknowledgement for {subject} within {timeout}s: the events may or may not be stored; "
            "retry the same events (their ids make a retry safe)"
        ) from None
    return json.loads(reply.data)


def _appended(ack: dict, claim_id: str, expected_seq: int, *, count: int, last_hash: str) -> Appended:
    error = ack.get("error")
    if error is None:
        seq = int(ack["seq"])
        duplicate = bool(ack.get("duplicate"))
        return Appended(claim_id, None if duplicate else seq - count + 1, seq, duplicate, last_hash)
    code = error.get("err_code")
    if code == WRONG_LAST_SEQUENCE:
        raise ConflictError(claim_id, expected_seq, error.get("description", ""))
    if code == BATCH_DUPLICATE_MSG_ID:
        raise _AlreadyStored
    raise PublishError(f"JetStream refused the append to {claim_id}: {error.get('description')} (err_code {code})")
