"""The claim log on a real nats-server: appends, conflicts, retries, reads and refused tampering."""

from __future__ import annotations

import pytest
from nats.js.api import StreamConfig
from nats.js.errors import APIError

from events.subjects import partition_of_token
from services.log import ClaimLog, ConflictError, LogConfigError, StreamSpec, connect
from tests.builders import attached, drafted, withdrawn


async def test_an_append_is_read_back_in_order_with_a_hash_chain(claim_log: ClaimLog, claim_id: str):
    events = [drafted(claim_id), attached(claim_id, "s1"), attached(claim_id, "s2")]
    appended = await claim_log.append(claim_id, events, expected_seq=0, prev_hash=None)
    stored = await claim_log.read_claim(claim_id)
    assert [s.event.event_id for s in stored] == [e.event_id for e in events]
    assert [s.seq for s in stored] == list(range(appended.first_seq, appended.last_seq + 1))
    assert stored[0].event.prev_hash is None
    assert stored[1].event.prev_hash == stored[0].hash
    assert stored[2].event.prev_hash == stored[1].hash
    assert appended.last_hash == stored[2].hash
    # Published on claims.<claim>.<Type>, stored by the server's transform in the claim's partition.
    partition = partition_of_token(claim_id, 16)
    assert stored[1].subject == f"claims.{partition}.{claim_id}.SourceAttached"


async def test_a_writer_with_a_stale_expected_sequence_gets_a_conflict_and_writes_nothing(
    claim_log: ClaimLog, claim_id: str
):
    await claim_log.append(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
    head = await claim_log.claim_head(claim_id)
    await claim_log.append(claim_id, [attached(claim_id, "s1")], expected_seq=head.seq, prev_hash=head.hash)
    with pytest.raises(ConflictError, match=f"conflict on {claim_id}"):
        await claim_log.append(
            claim_id, [attached(claim_id, "s2"), withdrawn(claim_id, "s1")], expected_seq=head.seq, prev_hash=head.hash
        )
    assert [s.event.type for s in await claim_log.read_claim(claim_id)] == ["ClaimDrafted", "SourceAttached"]


async def test_two_connections_racing_on_one_claim_end_with_one_winner(nats_url: str, claim_log: ClaimLog, claim_id: str):
    other_nc = await connect(nats_url)
    other = ClaimLog(other_nc, StreamSpec("CLAIMS"))
    await claim_log.append(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
    head = await claim_log.claim_head(claim_id)
    await other.append(claim_id, [attached(claim_id, "theirs")], expected_seq=head.seq, prev_hash=head.hash)
    with pytest.raises(ConflictError):
        await claim_log.append(claim_id, [attached(claim_id, "mine")], expected_seq=head.seq, prev_hash=head.hash)
    await other_nc.close()
    sources = [s.event.source_id for s in await claim_log.read_claim(claim_id) if s.event.type == "SourceAttached"]
    assert sources == ["theirs"]


async def test_a_retried_append_is_stored_once(claim_log: ClaimLog, claim_id: str):
    single = [drafted(claim_id)]
    first = await claim_log.append(claim_id, single, expected_seq=0, prev_hash=None)
    retry = await claim_log.append(claim_id, single, expected_seq=0, prev_hash=None)
    assert retry.duplicate and retry.last_seq == first.last_seq
    batch = [attached(claim_id, "s1"), attached(claim_id, "s2")]
    await claim_log.append(claim_id, batch, expected_seq=first.last_seq, prev_hash=first.last_hash)
    again = await claim_log.append(claim_id, batch, expected_seq=first.last_seq, prev_hash=first.last_hash)
    assert again.duplicate
    assert len(await claim_log.read_claim(claim_id)) == 3


async def test_deleting_or_purging_events_is_refused_by_the_server(claim_log: ClaimLog, claim_id: str):
    appended = await claim_log.append(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
    js = claim_log.nc.jetstream()
    with pytest.raises(APIError):
        await js.delete_msg("CLAIMS", appended.last_seq)
    with pytest.raises(APIError):
        await js.purge_stream("CLAIMS")
    with pytest.raises(APIError):
        await js.update_stream(StreamConfig(name="CLAIMS", subjects=["claims.>"], deny_delete=False, deny_purge=False))
    assert [s.seq for s in await claim_log.read_claim(claim_id)] == [appended.last_seq]


async def test_claimlog_refuses_a_stream_that_allows_deletes(nats_url: str):
    nc = await connect(nats_url)
    await nc.jetstream().add_stream(StreamConfig(name="LOOSE", subjects=["claims.>"]))
    with pytest.raises(LogConfigError, match="deny_delete is off.*deny_purge is off"):
        await ClaimLog(nc, StreamSpec("LOOSE")).ensure()
    await nc.close()


async def test_a_claim_read_stops_at_the_requested_sequence(claim_log: ClaimLog, claim_id: str):
    appended = await claim_log.append(
        claim_id, [drafted(claim_id), attached(claim_id, "s1"), attached(claim_id, "s2")], expected_seq=0, prev_hash=None
    )
    early = await claim_log.read_claim(claim_id, up_to_seq=appended.first_seq + 1)
    assert [s.seq for s in early] == [appended.first_seq, appended.first_seq + 1]
    assert await claim_log.read_claim("CLM-99999999") == []


async def test_reads_page_through_claims_longer_than_one_batch(claim_log: ClaimLog, claim_id: str):
    head = await claim_log.append(claim_id, [drafted(claim_id)], expected_seq=0, prev_hash=None)
    for chunk in range(3):
        events = [attached(claim_id, f"s{chunk}-{i}") for i in range(500)]
        head = await claim_log.append(claim_id, events, expected_seq=head.last_seq, prev_hash=head.last_hash)
    stored = await claim_log.read_claim(claim_id)
    assert len(stored) == 1501
    assert all(b.event.prev_hash == a.hash for a, b in zip(stored, stored[1:], strict=False))


async def test_a_cluster_url_lists_several_servers_and_any_live_one_will_do(nats_url: str):
    nc = await connect(f"nats://127.0.0.1:1, {nats_url}")
    assert nc.is_connected
    await nc.close()
