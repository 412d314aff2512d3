"""Appending events to a claim: message ids, the per-claim expected sequence, atomic batches, checked acks."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import NotFoundError

from events import Event
from events.subjects import DEFAULT_LAYOUT, LogLayout
from services.log.chain import chain, event_hash
from services.log.errors import ConflictError, PublishError
from services.log.reader import read_claim
from services.log.signing import Signer, sign_messages

WRONG_LAST_SEQUENCE = 10071
BATCH_DUPLICATE_MSG_ID = 10201
MAX_BATCH = 1000
ASK_TIMEOUT = 2.0  # seconds to ask the stream why an append went unanswered
MESSAGE_ID_NAMESPACE = uuid.UUID("0d7c4f3e-9a52-5b1e-8c47-2f6e1a9b3d80")
_NAMESPACE_BYTES = MESSAGE_ID_NAMESPACE.bytes
# A UUID's variant digit (RFC 9562: 10xx) for each hex digit a digest has in its place: a lookup, not a parse.
UUID_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def message_id(event: Event) -> str:
    """The event's ``Nats-Msg-Id``: derived from its actor, its claim and its event id, never chosen by a client.

    JetStream deduplicates by message id across the whole stream. Were it the event id, a writer could
    take an id another writer will use (or the id derived from another's ``Idempotency-Key``) and have
    that writer's event answered as a duplicate of its own, even on another claim. Derived from who
    writes and where, a message id can only ever collide with the same actor's same event on the same
    claim: exactly a retry.
    """
    # ``uuid.uuid5(MESSAGE_ID_NAMESPACE, name)`` written out: the same SHA-1 and bits, without the UUID
    # object and its checks, which cost twice the hash (a bulk ingest asks for one id an event).
    digest = hashlib.sha1(_NAMESPACE_BYTES + f"{event.actor.id}\x00{event.claim_id}\x00{event.event_id}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-5{digest[13:16]}-{UUID_VARIANT[digest[16]]}{digest[17:20]}-{digest[20:32]}"


@dataclass(frozen=True)
class Appended:
    """What the log acknowledged for one append."""

    claim_id: str
    first_seq: int
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
    layout: LogLayout = DEFAULT_LAYOUT,
    signer: Signer | None = None,
) -> Appended:
    """Append events to one claim, all or nothing, only if its last event is still at ``expected_seq``;
    signed once by ``signer`` (services/log/signing.py) when given."""
    check_append(claim_id, events)
    linked = chain(events, prev_hash)
    messages = batch_headers(claim_id, linked, expected_seq, layout=layout)
    sign_messages(signer, messages)
    for subject, data, headers in messages[:-1]:
        await nc.publish(subject, data, headers=headers)
    subject, data, headers = messages[-1]
    ack = await request_ack(nc, stream, subject, data, headers, timeout)
    try:
        return interpret_ack(ack, claim_id, expected_seq, count=len(linked), last_hash=event_hash(data))
    except (ConflictError, AlreadyStored) as refusal:
        return await settle_refusal(nc, stream, claim_id, events, expected_seq, refusal, layout=layout)


def check_append(claim_id: str, events: Sequence[Event]) -> None:
    """Refuse an append that is empty, too large, or mixes claims."""
    if not events or len(events) > MAX_BATCH:
        raise ValueError(f"an append holds 1 to {MAX_BATCH} events, got {len(events)}")
    strangers = {e.claim_id for e in events} - {claim_id}
    if strangers:
        raise ValueError(f"append to {claim_id} holds events of other claims: {sorted(strangers)}")


class AlreadyStored(Exception):
    """An atomic batch whose message ids the stream has already seen."""


async def settle_refusal(
    nc: Client,
    stream: str,
    claim_id: str,
    events: Sequence[Event],
    expected_seq: int,
    refusal: Exception,
    *,
    layout: LogLayout = DEFAULT_LAYOUT,
) -> Appended:
    """A refused append that is really a retry of one already stored is a duplicate; anything else is raised."""
    retry = await _stored_before(nc, stream, claim_id, events, after_seq=expected_seq, layout=layout)
    if retry is not None:
        return retry
    if isinstance(refusal, ConflictError):
        raise refusal
    raise PublishError(f"JetStream says the events for {claim_id} were stored, but they are not there")


async def _stored_before(nc: Client, stream: str, claim_id: str, events: Sequence[Event], *, after_seq: int, layout: LogLayout):
    wanted = [message_id(event) for event in events]
    ours = set(wanted)
    stored = [s for s in await read_claim(nc, stream, claim_id, after_seq=after_seq, layout=layout) if s.msg_id in ours]
    if [s.msg_id for s in stored] != wanted:
        return None
    return Appended(claim_id, stored[0].seq, stored[-1].seq, True, stored[-1].hash)


def batch_headers(
    claim_id: str, linked: list[tuple[Event, bytes]], expected_seq: int, *, layout: LogLayout = DEFAULT_LAYOUT
) -> list[tuple[str, bytes, dict]]:
    """Subject, bytes and headers of each message of one append (an atomic batch when more than one).

    The subject is the one producers publish on; the expected sequence covers every stored subject of
    the claim, whichever partition the stream stores it in."""
    headers = [{"Nats-Msg-Id": message_id(event)} for event, _ in linked]
    headers[0]["Nats-Expected-Last-Subject-Sequence"] = str(expected_seq)
    headers[0]["Nats-Expected-Last-Subject-Sequence-Subject"] = layout.claim_filter(claim_id)
    if len(linked) > 1:
        batch_id = uuid.uuid4().hex
        for number, header in enumerate(headers, start=1):
            header["Nats-Batch-Id"] = batch_id
            header["Nats-Batch-Sequence"] = str(number)
        headers[-1]["Nats-Batch-Commit"] = "1"
    return [
        (layout.publish_subject(claim_id, event.type), data, header)
        for (event, data), header in zip(linked, headers, strict=True)
    ]


async def request_ack(nc: Client, stream: str, subject: str, data: bytes, headers: dict[str, str], timeout: float) -> dict:
    try:
        reply = await nc.request(subject, data, headers=headers, timeout=timeout)
    except NoRespondersError:
        raise PublishError(await unanswered(nc, stream, subject)) from None
    except (NatsTimeoutError, TimeoutError):
        raise PublishError(await unacknowledged(nc, stream, subject, timeout)) from None
    return parse_ack(reply.data, reply.headers, f"the append to {subject}")


async def unanswered(nc: Client, stream: str, subject: str) -> str:
    """Why nothing answered an append on ``subject`` (a 503: nothing was stored), asked of the stream: only
    its leader stores, so while one is elected (a node left or restarted) nothing answers, as when no
    stream stores the subject at all."""
    state = await leadership(nc, stream)
    if state == "missing":
        return f"no stream stores {subject}: is the claim stream created?"
    if state == "unreachable":
        return (
            f"nothing was stored on {subject}: JetStream does not answer either: the cluster is "
            "electing a leader, or fewer than a majority of its nodes are up; retry in a few seconds"
        )
    if state == "electing":
        return f"nothing was stored on {subject}: the log ({stream}) is electing a leader; retry in a few seconds"
    return (
        f"nothing was stored on {subject}: the log ({stream}) was electing a leader until now (retry), or does not "
        "store that subject (is the claim stream created with this subject prefix?)"
    )


async def unacknowledged(nc: Client, stream: str, subject: str, timeout: float) -> str:
    """Why an append on ``subject`` had no acknowledgement within ``timeout``: the request reached a
    leader that died, or one that lost its quorum, before it answered, so the events may be stored or
    not, and a retry of the same events is safe either way. The stream says whether it is between leaders."""
    state = await leadership(nc, stream)
    why = {
        "unreachable": "JetStream does not answer either: the cluster is electing a leader, or fewer than a "
        "majority of its nodes are up",
        "electing": f"the log ({stream}) is electing a leader",
        "missing": f"no stream {stream} answers: is the claim stream created?",
    }.get(state, f"the log ({stream}) may have been electing a leader (it has one now), or its server is overloaded")
    return (
        f"no acknowledgement for {subject} within {timeout}s: {why}; the events may or may not be stored: "
        "retry the same events in a few seconds (their ids make a retry safe)"
    )


async def leadership(nc: Client, stream: str) -> str:
    """``led``, ``electing`` (the stream has no leader), ``missing`` (no such stream), or ``unreachable``
    (JetStream's own API does not answer)."""
    try:
        info = await nc.jetstream(timeout=ASK_TIMEOUT).stream_info(stream)
    except NotFoundError:
        return "missing"
    except Exception:  # noqa: BLE001 - JetStream's own API does not answer either
        return "unreachable"
    if info.cluster is not None and not info.cluster.leader:
        return "electing"
    return "led"


def parse_ack(data: bytes, headers: object, what: str) -> dict:
    """An acknowledgement's JSON; a reply that is none (a 503 status: no stream leader answered) is a
    PublishError saying ``what`` was not stored ("the append to CLM-0338", "the event for sequence 7")."""
    try:
        ack = json.loads(data)
    except ValueError:
        status = headers.get("Status") if headers else None  # RawHeaders or nats-py's dict
        if status == "503":
            raise PublishError(
                f"{what} was not stored: no stream stores its subject right now: the log may be electing a leader "
                "(retry in a few seconds), or the claim stream is not created"
            ) from None
        raise PublishError(f"{what}: the server's answer is not an acknowledgement: {data[:200]!r}") from None
    if not isinstance(ack, dict):
        raise PublishError(f"{what}: the server's answer is not an acknowledgement: {data[:200]!r}")
    return ack


def interpret_ack(ack: dict, claim_id: str, expected_seq: int, *, count: int, last_hash: str) -> Appended:
    error = ack.get("error")
    if error is None:
        seq = int(ack["seq"])  # a deduplicated single event: where its first copy is
        return Appended(claim_id, seq - count + 1, seq, bool(ack.get("duplicate")), last_hash)
    code = error.get("err_code")
    if code == WRONG_LAST_SEQUENCE:
        raise ConflictError(claim_id, expected_seq, error.get("description", ""))
    if code == BATCH_DUPLICATE_MSG_ID:
        raise AlreadyStored
    raise PublishError(f"JetStream refused the append to {claim_id}: {error.get('description')} (err_code {code})")
