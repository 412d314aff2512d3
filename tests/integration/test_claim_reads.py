"""Reading one claim on a real nats-server: exactly its events, in order, with their store times, up to a point."""

from __future__ import annotations

from datetime import UTC, datetime

import nats
import pytest

import services.log.reader as reader
from events import encode
from events.subjects import claim_of, event_subject
from services.log import ClaimLog, LogError, StoredEvent, StreamSpec, connect
from services.log.chain import chain
from services.log.reader import RESTORED_TIME, ClaimReader, read_claim
from tests.builders import attached, drafted
from tests.conftest import random_claim_id


async def _interleaved(claim_log: ClaimLog, claims: list[str], per_claim: int) -> dict[str, list[int]]:
    """``per_claim`` events of each claim, published round-robin: each claim's sequences, in order."""
    linked = {claim: chain([drafted(claim)] + [attached(claim, f"s{i}") for i in range(per_claim - 1)], None) for claim in claims}
    js, seqs = claim_log.nc.jetstream(), {claim: [] for claim in claims}
    for i in range(per_claim):
        for claim in claims:
            event, data = linked[claim][i]
            ack = await js.publish(event_subject(claim, event.type), data, stream=claim_log.stream)
            seqs[claim].append(ack.seq)
    return seqs


def _identity(stored: list[StoredEvent]) -> list[tuple]:
    return [(s.seq, s.subject, s.stored_at, s.data, s.msg_id) for s in stored]


async def test_a_claim_read_among_others_holds_exactly_its_events_up_to_the_point(claim_log: ClaimLog):
    claims = [random_claim_id() for _ in range(3)]
    seqs = await _interleaved(claim_log, claims, per_claim=12)
    mine = seqs[claims[1]]

    assert [s.seq for s in await claim_log.read_claim(claims[1])] == mine
    for up_to in (mine[0] - 1, mine[0], mine[0] + 1, mine[4], mine[4] + 1, mine[-1], mine[-1] + 50):
        assert [s.seq for s in await claim_log.read_claim(claims[1], up_to_seq=up_to)] == [q for q in mine if q <= up_to]
    assert [s.seq for s in await claim_log.read_claim(claims[1], after_seq=mine[3], up_to_seq=mine[8])] == mine[4:9]
    assert await claim_log.read_claim(claims[1], up_to_seq=0) == []
    assert all(claim_of(s.subject) == claims[1] for s in await claim_log.read_claim(claims[1]))


async def test_reads_in_small_pages_give_the_same_events(claim_log: ClaimLog, monkeypatch: pytest.MonkeyPatch):
    claims = [random_claim_id() for _ in range(2)]
    seqs = await _interleaved(claim_log, claims, per_claim=10)
    whole = await claim_log.read_claim(claims[0])
    middle = await claim_log.read_claim(claims[0], after_seq=seqs[claims[0]][1], up_to_seq=seqs[claims[0]][7])

    monkeypatch.setattr(reader, "PAGE", 3)  # pages of 3: the first page, then pages bounded by the head or the point
    async with ClaimReader(claim_log.nc, claim_log.stream) as small:
        assert _identity(await small.read(claims[0])) == _identity(whole)
        assert _identity(await small.read(claims[0], after_seq=seqs[claims[0]][1], up_to_seq=seqs[claims[0]][7])) == _identity(middle)
        for up_to in seqs[claims[0]]:
            assert [s.seq for s in await small.read(claims[0], up_to_seq=up_to)] == [q for q in seqs[claims[0]] if q <= up_to]
    assert [s.seq for s in whole] == seqs[claims[0]]


async def test_a_read_has_the_server_store_times_and_a_restored_store_time_where_one_was_imported(claim_log: ClaimLog):
    claim = random_claim_id()
    (first, first_data), (second, second_data) = chain([drafted(claim), attached(claim, "s1")], None)
    js = claim_log.nc.jetstream()
    before = datetime.now(UTC)
    await js.publish(event_subject(claim, first.type), first_data, stream=claim_log.stream, headers={"Nats-Msg-Id": first.event_id})
    after = datetime.now(UTC)
    restored = "2020-01-02T03:04:05.123456789Z"
    await js.publish(event_subject(claim, second.type), second_data, stream=claim_log.stream, headers={RESTORED_TIME: restored})

    stored = await read_claim(claim_log.nc, claim_log.stream, claim)

    assert [s.data for s in stored] == [first_data, second_data] and stored[0].data == encode(first)
    assert before.replace(microsecond=0) <= stored[0].stored_at <= after and stored[0].stored_at.tzinfo is UTC
    assert stored[0].msg_id == first.event_id and stored[1].msg_id is None
    assert stored[1].stored_at == datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert stored[1].event.prev_hash == stored[0].hash


async def test_any_nats_py_client_reads_a_claim_as_claimlogs_connections_do(claim_log: ClaimLog, nats_url: str):
    claims = [random_claim_id() for _ in range(2)]
    await _interleaved(claim_log, claims, per_claim=6)
    plain = await nats.connect(nats_url)  # headers parsed by nats-py, replies through its callback task
    try:
        async with ClaimReader(plain, claim_log.stream) as other:
            assert _identity(await other.read(claims[0])) == _identity(await claim_log.read_claim(claims[0]))
            assert await other.read(random_claim_id()) == []
    finally:
        await plain.close()


async def test_reading_from_a_server_without_the_stream_says_so(nats_url: str):
    nc = await connect(nats_url)  # no stream created on this server
    try:
        log = ClaimLog(nc, StreamSpec("CLAIMS"))
        for read in (lambda: log.read_claim("CLM-0338"), lambda: log.read_log(after_seq=0, limit=10)):
            with pytest.raises(LogError, match=r"reading from CLAIMS failed: no stream CLAIMS on this NATS server \(503\)"):
                await read()
    finally:
        await nc.close()
