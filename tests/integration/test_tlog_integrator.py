"""The transparency log's integrator on a real nats-server: every stored message an entry, resumed, never forked."""

from __future__ import annotations

import asyncio

import pytest

from events.log_entry import MAX_MESSAGE_BYTES, decode_entry
from services.log import ClaimLog, StreamSpec, connect
from services.log.reader import ClaimReader
from services.log.tlog_store import LostRace, TlogStore
from services.tlog.integrator import Integrator, Refused
from services.tlog.tree import checkpoint_of, consistency, inclusion
from tests.builders import drafted
from tests.conftest import random_claim_id
from tests.integration.audit_log import integrate
from tlog.hashes import leaf_hash
from tlog.note import Ed25519Signer
from tlog.proofs import verify_consistency, verify_inclusion
from tlog.tiles import Tile, decode_bundle

ORIGIN = "registry.test/claims"


async def append_drafts(claim_log: ClaimLog, count: int) -> None:
    for _ in range(count):
        claim = random_claim_id()
        await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)


async def test_every_stored_message_is_an_entry_in_order_with_proofs(claim_log: ClaimLog):
    await append_drafts(claim_log, 300)
    await claim_log.nc.jetstream().publish(f"claims.{random_claim_id()}.ClaimDrafted", b"not json at all")
    signer = Ed25519Signer.generate(ORIGIN)
    integrator = await integrate(claim_log.nc, signer)
    store = integrator.store
    note, _ = await store.checkpoint()
    checkpoint = checkpoint_of(note, await store.tree())
    assert checkpoint.size == 301 and checkpoint.origin == ORIGIN
    full = decode_bundle(await store.tile(Tile(None, 0).path()))
    partial = decode_bundle(await store.tile(Tile(None, 1, 45).path()))
    entries = full + partial
    assert decode_entry(entries[0]).event_type == "ClaimDrafted"
    assert decode_entry(entries[300]).body == b"not json at all"  # an unreadable message is an entry too
    for index in (0, 255, 300):
        proof = await inclusion(store, index, 301)
        verify_inclusion(index, 301, leaf_hash(entries[index]), proof, checkpoint.root)


async def test_a_tree_resumed_after_a_stop_continues_consistently(claim_log: ClaimLog):
    signer = Ed25519Signer.generate(ORIGIN)
    await append_drafts(claim_log, 40)
    first = await integrate(claim_log.nc, signer)
    before = first.tree.checkpoint
    await append_drafts(claim_log, 30)
    second = await integrate(claim_log.nc, signer)
    after = second.tree.checkpoint
    assert (before.size, after.size) == (40, 70)
    proof = await consistency(second.store, 40, 70)
    verify_consistency(40, 70, before.root, after.root, proof)


async def test_a_second_integrator_cannot_fork_the_tree(claim_log: ClaimLog):
    signer = Ed25519Signer.generate(ORIGIN)
    await append_drafts(claim_log, 5)
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    one, two = (Integrator(claim_log.nc, store, signer, holder=h) for h in ("one", "two"))
    one.tree, two.tree = await one.open_tree(), await two.open_tree()
    for integrator in (one, two):
        for message in await _read(claim_log, 0, 5):
            integrator.tree.builder.append(message)
    await one.publish()
    with pytest.raises(LostRace, match="another integrator"):
        await two.publish()
    assert await store.take_lease("one", 10) and not await store.take_lease("two", 10)


async def _read(claim_log: ClaimLog, after: int, count: int) -> list[bytes]:
    from services.tlog.integrator import entry_of

    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        return [entry_of(m) for m in await reader.read_log(after_seq=after, limit=count)]


async def test_another_key_may_not_extend_the_tree(claim_log: ClaimLog):
    await append_drafts(claim_log, 2)
    await integrate(claim_log.nc, Ed25519Signer.generate(ORIGIN))
    with pytest.raises(Refused, match="a log's key never changes"):
        await integrate(claim_log.nc, Ed25519Signer.generate(ORIGIN))


async def test_the_stream_refuses_a_message_larger_than_an_entry_holds(claim_log: ClaimLog):
    with pytest.raises(Exception, match="maximum"):  # noqa: B017 - the server's own refusal, whatever nats-py calls it
        await claim_log.nc.jetstream().publish(f"claims.{random_claim_id()}.ClaimDrafted", b"x" * (MAX_MESSAGE_BYTES + 1))
    info = await claim_log.nc.jetstream().stream_info("CLAIMS")
    assert info.config.max_msg_size == MAX_MESSAGE_BYTES


@pytest.mark.private_nats
async def test_a_rewritten_stream_is_refused_and_an_identical_one_continues(nats_url: str):
    nc = await connect(nats_url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        await append_drafts(claim_log, 20)
        signer = Ed25519Signer.generate(ORIGIN)
        await integrate(nc, signer)
        async with ClaimReader(nc, "CLAIMS") as reader:
            kept = await reader.read_log(after_seq=0, limit=20)
        config = (await nc.jetstream().stream_info("CLAIMS")).config
        await _recreate(nc, config, kept, change=None)
        assert (await integrate(nc, signer)).tree.checkpoint.size == 20  # same entries: the tree continues
        await _recreate(nc, config, kept, change=7)
        with pytest.raises(Refused, match="the log was rewritten"):
            await integrate(nc, signer)
    finally:
        await nc.close()


async def _recreate(nc, config, kept, *, change: int | None) -> None:
    """The admin's rewrite: delete the stream, make it again and republish (one message changed)."""
    from services.log.connection import RESTORED_TIME

    js = nc.jetstream()
    await js.delete_stream("CLAIMS")
    await js.add_stream(config)
    for n, message in enumerate(kept):
        data = message.data if n != change else message.data.replace(b"}", b',"x":1}', 1)
        headers = {RESTORED_TIME: message.stored_at.isoformat().replace("+00:00", "Z")}
        if message.msg_id:
            headers["Nats-Msg-Id"] = message.msg_id
        claim, event_type = message.subject.split(".")[-2:]
        await js.publish(f"claims.{claim}.{event_type}", data, headers=headers)


async def test_a_refusal_stops_the_integrator_and_health_says_why(claim_log: ClaimLog):
    from services.tlog.published import PublishedLog

    await append_drafts(claim_log, 2)
    await integrate(claim_log.nc, Ed25519Signer.generate(ORIGIN))
    assert (await PublishedLog(claim_log.nc, "CLAIMS").health())["size"] == 2
    other = Integrator(claim_log.nc, await TlogStore.open(claim_log.nc, "CLAIMS"), Ed25519Signer.generate(ORIGIN), holder="two")
    with pytest.raises(Refused):
        await other.run(asyncio.Event())
    health = await PublishedLog(claim_log.nc, "CLAIMS").health()
    assert health["integrator"] == "refused" and "a log's key never changes" in health["reason"]


async def test_a_lease_bucket_without_a_leader_for_a_moment_does_not_stop_the_integrator(claim_log: ClaimLog):
    """While the lease bucket's leader is elected (a node lost), taking the lease gets "no responders": the
    integrator waits and takes it again, as it does for every other error of a lost node."""
    from nats.errors import NoRespondersError

    await append_drafts(claim_log, 5)
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    integrator = Integrator(claim_log.nc, store, Ed25519Signer.generate(ORIGIN), holder="one", interval=0.05)
    take_lease, refusals = store.take_lease, []

    async def electing(*args, **kwargs):
        if not refusals:
            refusals.append(1)
            raise NoRespondersError
        return await take_lease(*args, **kwargs)

    store.take_lease = electing
    stop = asyncio.Event()
    running = asyncio.create_task(integrator.run(stop))
    try:
        async with asyncio.timeout(30):
            while integrator.tree is None or integrator.tree.checkpoint.size < 5:
                assert not running.done(), running.exception()
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
    assert refusals == [1]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_write_answers_its_entry_index_and_that_entry_is_proved(api, claim_id: str):
    from tests.integration.command_api import Api
    from tlog.proof import verify_proof

    assert isinstance(api, Api)
    answer = await api.send("draft_claim", claim_id=claim_id, slug="s", statement="S.", capability="C", observed_on="O.")
    assert answer.status_code == 201, answer.text
    [event] = answer.json()["events"]
    assert event["entry_index"] == event["seq"] - 1
    signer = Ed25519Signer.generate(ORIGIN)
    integrator = await integrate(api.log.nc, signer)
    store = integrator.store
    entries = decode_bundle(await store.tile(Tile(None, 0, integrator.tree.checkpoint.size).path()))
    proof = await api.http.get(f"/log/proof/{event['entry_index']}")
    assert proof.status_code == 200
    verify_proof(proof.text, entries[event["entry_index"]], log=[signer.verifier()])
    assert decode_entry(entries[event["entry_index"]]).claim_id == claim_id
