"""Parsing what JetStream sends: ack subjects and timestamps, identical on every read path."""

from __future__ import annotations

import pytest
from nats.aio.client import Client

from services.log import LogError, PublishError
from services.log.connection import RESTORED_TIME, FastHeadersClient, RawHeaders, encode_headers
from services.log.consumer import Delivery, DurableConsumer, _position
from services.log.reader import parse_store_time, store_time_from_ns
from services.log.writer import parse_ack


def test_store_times_agree_whether_read_as_text_or_as_nanoseconds():
    nanoseconds = 1_796_230_567_939_147_999
    text = "2026-12-02T16:56:07.939147999Z"
    assert store_time_from_ns(nanoseconds) == parse_store_time(text)
    assert parse_store_time(text).microsecond == 939147


def test_both_ack_subject_formats_give_the_stream_sequence_and_time():
    v1 = "$JS.ACK.CLAIMS.projector.1.42.40.1796230567939147999.7"
    v2 = "$JS.ACK._.ACCOUNTHASH.CLAIMS.projector.1.42.40.1796230567939147999.7.token"
    assert _position(v1) == _position(v2) == (42, 1_796_230_567_939_147_999)
    delivery = Delivery(*_position(v2), "claims.CLM-0001.ClaimDrafted", b"{}", v2, {})
    assert delivery.stamp() == (1_796_230_567_939_147_999, None)
    assert delivery.stored_at == store_time_from_ns(1_796_230_567_939_147_999)


def test_an_imported_events_restored_store_time_wins_over_the_servers():
    restored = "2025-01-02T03:04:05.123456Z"
    reply = "$JS.ACK.CLAIMS.p.1.42.40.1796230567939147999.7"
    delivery = Delivery(*_position(reply), "claims.CLM-0001.ClaimDrafted", b"{}", reply, {RESTORED_TIME: restored})
    assert delivery.stamp() == (1_796_230_567_939_147_999, restored)
    assert delivery.stored_at == parse_store_time(restored)


def test_a_reply_that_is_not_an_ack_subject_is_refused():
    with pytest.raises(LogError, match="not a JetStream delivery"):
        _position("_INBOX.abc")


DIRECT_GET_REPLY = (
    # A stored message's own headers come first (here, forged server names); the server's follow.
    b"NATS/1.0\r\nNats-Msg-Id: 0193a1b2-0000-7000-8000-000000000000\r\nNats-Sequence: 999\r\n"
    b"Nats-Subject: claims.FAKE.ClaimDrafted\r\nClaimlog-Stored-At: 2026-01-01T00:00:00Z\r\n"
    b"Nats-Stream: CLAIMS\r\nNats-Subject: claims.CLM-0338.ClaimDrafted\r\nNats-Sequence: 12\r\n"
    b"Nats-Time-Stamp: 2026-12-03T05:00:00.123456789Z\r\nNats-Num-Pending: 3\r\nNats-Last-Sequence: 11\r\n\r\n"
)
NAMES = ("Nats-Msg-Id", "Nats-Sequence", "Nats-Subject", "Claimlog-Stored-At", "Nats-Time-Stamp", "Nats-Num-Pending",
         "Status", "Description", "Absent")


@pytest.mark.parametrize(
    "raw",
    [
        DIRECT_GET_REPLY,
        b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 1\r\n\r\n",
        b"NATS/1.0 404 Message Not Found\r\n\r\n",
        b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 7\r\n\r\n",
        b"NATS/1.0 404\r\n\r\n",
    ],
)
async def test_raw_headers_read_each_name_as_nats_py_does(raw: bytes):
    parsed = await Client()._process_headers(raw)
    headers = RawHeaders(raw)
    assert {name: headers.get(name) for name in NAMES} == {name: parsed.get(name) for name in NAMES}


def test_of_a_name_given_twice_the_servers_value_wins():
    headers = RawHeaders(DIRECT_GET_REPLY)
    assert (headers["Nats-Sequence"], headers["Nats-Subject"]) == ("12", "claims.CLM-0338.ClaimDrafted")
    with pytest.raises(KeyError):
        headers["Nats-Absent"]
    assert not RawHeaders(None) and RawHeaders(None).get("Status") is None


async def sent(client: Client, headers: object, reply: str) -> bytes:
    """The bytes ``client`` hands its socket for one publish (nothing is connected: the command is caught)."""
    commands: list[bytes] = []

    async def catch(command: bytes, priority: bool = False) -> None:
        commands.append(command)

    client._send_command = catch
    await client._send_publish("claims.CLM-0338.SourceAttached", reply, b'{"x":1}', 7, headers)
    return b"".join(commands)


@pytest.mark.parametrize("reply", ["_INBOX.abc.17", ""])
@pytest.mark.parametrize(
    "headers",
    [
        {"Nats-Msg-Id": "0193a1b2-0000-7000-8000-000000000000", "Nats-Expected-Last-Subject-Sequence": "0",
         "Nats-Expected-Last-Subject-Sequence-Subject": "claims.CLM-0338.*"},
        {"Nats-Batch-Id": "abc", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1", "Padded": " value "},
        {"Utf8": "café"},
    ],
)
async def test_an_encoded_header_block_goes_out_as_nats_py_sends_the_dictionary(headers: dict, reply: str):
    assert await sent(FastHeadersClient(), encode_headers(headers), reply) == await sent(Client(), headers, reply)


@pytest.mark.parametrize("headers", [{"Bad Name": "x"}, {"Colon:Name": "x"}, {"": "x"}, {"Name": "two\r\nlines"}, {"Ünï": "x"}])
def test_a_header_that_would_break_the_block_is_refused(headers: dict):
    with pytest.raises(ValueError, match="cannot be sent"):
        encode_headers(headers)


def test_a_reply_that_is_no_acknowledgement_says_why():
    what = "the append to CLM-0338"
    assert parse_ack(b'{"stream":"CLAIMS","seq":7}', None, what) == {"stream": "CLAIMS", "seq": 7}
    with pytest.raises(PublishError, match="the append to CLM-0338 was not stored: no stream stores its subject"):
        parse_ack(b"", RawHeaders(b"NATS/1.0 503\r\n\r\n"), what)
    for data in (b"", b"[1]", b"\xff"):
        with pytest.raises(PublishError, match="the append to CLM-0338: the server's answer is not an acknowledgement"):
            parse_ack(data, RawHeaders(None), what)


def _frame(seq: int, delivered: int) -> tuple[str, str, bytes, dict[str, str]]:
    reply = f"$JS.ACK.CLAIMS.projector.1.{seq}.{delivered}.1796230567939147999.0"
    return "claims.CLM-0001.ClaimDrafted", reply, b"{}", {}


def test_a_delivery_past_one_lost_with_a_connection_is_refused_and_a_repeated_one_is_not():
    consumer = DurableConsumer(Client(), "CLAIMS", "projector")
    batch: list[Delivery] = []
    for seq, delivered in ((10, 1), (11, 2), (10, 1), (11, 2), (12, 3)):  # the server sent 10 and 11 again
        consumer._take(_frame(seq, delivered), batch)
    assert [d.seq for d in batch] == [10, 11, 10, 11, 12]
    with pytest.raises(LogError, match="skipped 2 deliveries before sequence 15"):
        consumer._take(_frame(15, 6), batch)  # deliveries 4 and 5 (sequences 13 and 14) never arrived
    consumer._take(_frame(13, 1), batch)  # started again: counting starts again


def test_a_message_id_is_the_uuid5_of_actor_claim_and_event_id():
    import random
    import uuid

    from events import Actor, new_event_id
    from events.claim import ClaimRetracted
    from events.envelope import utc_now
    from services.log.writer import MESSAGE_ID_NAMESPACE, message_id

    rng = random.Random(7)
    for number in range(2000):  # every value of the hex digits the variant and version bits are cut from
        actor = Actor(id=f"bot-{rng.getrandbits(32):x}", kind="service")
        event = ClaimRetracted(event_id=new_event_id(), claim_id=f"CLM-{number:06d}", occurred_at=utc_now(), actor=actor, reason="r")
        expected = uuid.uuid5(MESSAGE_ID_NAMESPACE, f"{actor.id}\x00{event.claim_id}\x00{event.event_id}")
        assert message_id(event) == str(expected)
