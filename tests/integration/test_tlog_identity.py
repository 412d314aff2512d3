"""A new log identity: when the tree cannot go on (a rewritten stream, a restore older than the last published
checkpoint), the operator starts a new log whose entry 0 names the previous log's last checkpoint; the new
tree covers the whole stream, the previous log's tiles stay, and an auditor replays the new log's pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from events.log_entry import decode_entry, decode_predecessor
from services.audit.backup import backup, restore
from services.log import ClaimLog, StreamSpec, connect
from services.log.reader import ClaimReader
from services.log.tlog_store import TlogStore
from services.tlog.identity import IdentityRefused, start_new_identity
from services.tlog.integrator import Refused, entry_of
from services.tlog.keys import create_signer, load_signer
from services.tlog.published import PublishedLog
from services.tlog.tree import checkpoint_of, inclusion
from services.tlog.witnesses import Witnesses, parse_witnesses
from tests.integration.audit_log import integrate, project, write_claims
from tests.integration.test_auditor_replay import registry
from tests.integration.test_tlog_integrator import _recreate, append_drafts
from tests.integration.test_tlog_witnessed import LOG, running_witness
from tlog.checkpoint import Checkpoint
from tlog.hashes import leaf_hash
from tlog.note import Ed25519Signer, sign_note
from tlog.proofs import verify_inclusion
from tlog.tiles import Tile, decode_bundle

ORIGIN, SUCCESSOR = "registry.test/first", "registry.test/second"


async def stored_checkpoint(store: TlogStore) -> tuple[str, Checkpoint]:
    note, _ = await store.checkpoint()
    return note, checkpoint_of(note, await store.tree())


@pytest.mark.private_nats
async def test_a_rewritten_log_goes_on_as_a_new_log_whose_first_entry_names_the_last_checkpoint(nats_url: str, tmp_path: Path):
    key_file = tmp_path / "tlog" / "CLAIMS.key"
    first = create_signer(key_file, ORIGIN)
    nc = await connect(nats_url)
    try:
        claim_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        await append_drafts(claim_log, 20)
        store = (await integrate(nc, first)).store
        old_note, old = await stored_checkpoint(store)
        old_bundle = await store.tile(Tile(None, 0, 20).path())
        async with ClaimReader(nc, "CLAIMS") as reader:
            kept = await reader.read_log(after_seq=0, limit=20)
        await _recreate(nc, (await nc.jetstream().stream_info("CLAIMS")).config, kept, change=7)
        with pytest.raises(Refused, match="the log was rewritten"):
            await integrate(nc, first)

        made = await start_new_identity(nc, await TlogStore.open(nc, "CLAIMS"), key_file, SUCCESSOR)
        assert (made.predecessor.size, made.predecessor.root) == (old.size, old.root) and made.sources == ["the stored checkpoint"]
        second = load_signer(key_file)
        assert second.name == SUCCESSOR and second.vkey() == made.record.vkey
        assert load_signer(key_file.with_name(f"CLAIMS.{first.key_id:08x}.retired.key")).vkey() == first.vkey()

        store = (await integrate(nc, second)).store
        note, checkpoint = await stored_checkpoint(store)
        assert (checkpoint.origin, checkpoint.size) == (SUCCESSOR, 21)  # the predecessor entry, then all 20 messages
        entries = decode_bundle(await store.tile(Tile(None, 0, 21).path()))
        stated = decode_predecessor(entries[0])
        assert stated is not None and (stated.vkey, stated.checkpoint) == (first.vkey(), old_note)
        async with ClaimReader(nc, "CLAIMS") as reader:
            now = await reader.read_log(after_seq=0, limit=20)
        assert entries[1:] == [entry_of(message) for message in now]  # entry s is the message at sequence s
        assert decode_entry(entries[8]).body == now[7].data  # the rewritten one, in the new tree
        verify_inclusion(8, 21, leaf_hash(entries[8]), await inclusion(store, 8, 21), checkpoint.root)

        old_store = await TlogStore.open(nc, "CLAIMS")  # the previous log's tiles, under their own paths, as they were
        assert await old_store.tile(Tile(None, 0, 20).path()) == old_bundle
        published = PublishedLog(nc, "CLAIMS")
        assert (await published.signed())[0] == note and await published.entry_index(8) == 8
        assert await published.tile(Tile(None, 0, 21)) == await store.tile(Tile(None, 0, 21).path())

        await append_drafts(claim_log, 3)
        assert (await integrate(nc, second)).tree.checkpoint.size == 24  # it goes on, resumed from its own tiles
    finally:
        await nc.close()


async def test_an_auditor_replays_a_successor_log_and_names_the_checkpoint_it_follows(
    claim_log: ClaimLog, engine: Engine, tmp_path: Path
):
    from services.auditor.run import run_audit

    key_file = tmp_path / "tlog" / "CLAIMS.key"
    first = create_signer(key_file, ORIGIN)
    claims = await write_claims(claim_log, 3)
    await integrate(claim_log.nc, first)
    _, old = await stored_checkpoint(await TlogStore.open(claim_log.nc, "CLAIMS"))
    await start_new_identity(claim_log.nc, await TlogStore.open(claim_log.nc, "CLAIMS"), key_file, SUCCESSOR)
    claims += await write_claims(claim_log, 2)
    head = await project(claim_log, engine)
    second = load_signer(key_file)
    await integrate(claim_log.nc, second)
    report = await run_audit("http://registry", tmp_path / "audit", key=second.vkey(), witnesses=(), per_second=10_000,
                             progress=lambda *_: None, say=lambda _: None, client=registry(claim_log, engine), compare_pages=True)
    assert report.checkpoint.size == head + 1 and report.unreadable_entries == []
    assert report.predecessor is not None and (report.predecessor.origin, report.predecessor.root) == (ORIGIN, old.root)
    comparison = report.comparison
    assert comparison is not None and comparison.size == head  # the pages as of the stream's head, not the tree's size
    assert comparison.differences == [], [str(d) for d in comparison.differences]
    assert comparison.claims_compared == len(claims)


async def test_the_largest_checkpoint_the_previous_key_signed_is_named_and_a_fork_changes_nothing(claim_log: ClaimLog, tmp_path: Path):
    key_file = tmp_path / "tlog" / "CLAIMS.key"
    first = create_signer(key_file, ORIGIN)
    await append_drafts(claim_log, 5)
    store = (await integrate(claim_log.nc, first)).store
    record = await store.tree()
    later = sign_note(Checkpoint(ORIGIN, 9, bytes(32)).text(), [first])  # as a witness holds it, after a restore lost sizes 6 to 9
    stranger = sign_note(Checkpoint(ORIGIN, 12, bytes(32)).text(), [Ed25519Signer(ORIGIN, bytes(range(32)))])
    with pytest.raises(IdentityRefused, match="mirror is not a checkpoint signed by the log"):
        await start_new_identity(claim_log.nc, store, key_file, SUCCESSOR, notes=[("mirror", stranger)])
    other = sign_note(Checkpoint(ORIGIN, 9, bytes([1]) * 32).text(), [first])
    with pytest.raises(IdentityRefused, match="two checkpoints of size 9 with different roots"):
        await start_new_identity(claim_log.nc, store, key_file, SUCCESSOR, notes=[("witness", later), ("mirror", other)])
    with pytest.raises(IdentityRefused, match="is the current log's origin"):
        await start_new_identity(claim_log.nc, store, key_file, ORIGIN)
    await store.take_lease("a running integrator", 30)
    with pytest.raises(IdentityRefused, match="stop claimlog"):
        await start_new_identity(claim_log.nc, store, key_file, SUCCESSOR)
    assert await store.tree() == record and load_signer(key_file).vkey() == first.vkey()  # refused: nothing changed

    await store.take_lease("a running integrator", 0)  # it stopped
    made = await start_new_identity(claim_log.nc, store, key_file, SUCCESSOR, notes=[("witness", later)])
    assert made.predecessor.size == 9 and made.sources == ["witness"] and made.record.predecessor.checkpoint == later


async def test_a_registry_restored_from_before_its_last_witnessed_checkpoint_stops_and_goes_on_as_a_new_log(shared_nats, tmp_path: Path):
    """The restored tree is consistent with itself, but a witness cosigned a larger one: new writes would fork
    the log. The integrator refuses; the new log's entry 0 names the checkpoint the witness holds."""
    key_file = tmp_path / "data" / "tlog" / "CLAIMS.key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text(LOG.skey() + "\n")
    source, target = await connect(shared_nats.take()), await connect(shared_nats.take())
    try:
        with running_witness(tmp_path / "w", "--name", "witness.test/w1") as (url, vkeys):
            configured = f"{url} {vkeys[0]}"
            source_log = ClaimLog(source, StreamSpec("CLAIMS"))
            await source_log.ensure()
            await append_drafts(source_log, 5)
            await integrate(source, LOG, witnesses=Witnesses(parse_witnesses(configured), await TlogStore.open(source, "CLAIMS")))
            await backup(source_log, tmp_path / "backup")
            await append_drafts(source_log, 5)
            integrator = await integrate(source, LOG, witnesses=Witnesses(parse_witnesses(configured), await TlogStore.open(source, "CLAIMS")))
            await integrator._pushing
            published_note, published = await stored_checkpoint(integrator.store)
            assert published.size == 10

            target_log = ClaimLog(target, StreamSpec("CLAIMS"))
            await target_log.ensure()
            await restore(target_log, tmp_path / "backup", replicas=1, data_dir=tmp_path / "restored")
            witnesses = Witnesses(parse_witnesses(configured), await TlogStore.open(target, "CLAIMS"))
            with pytest.raises(Refused, match=f"{url} holds size 10.*restored from a backup older than the last published checkpoint"):
                await integrate(target, LOG, witnesses=witnesses)

            made = await start_new_identity(target, await TlogStore.open(target, "CLAIMS"), key_file, SUCCESSOR,
                                            witnesses=parse_witnesses(configured))
        assert made.sources == [f"witness {url}"] and (made.predecessor.size, made.predecessor.root) == (10, published.root)
        assert made.record.predecessor.checkpoint.startswith(published_note)  # with the witness's cosignatures
        assert (await integrate(target, load_signer(key_file))).tree.checkpoint.size == 6  # entry 0, then the 5 restored messages
    finally:
        await source.close()
        await target.close()


async def test_an_integrator_that_stops_or_refuses_gives_the_tree_up_at_once(claim_log: ClaimLog):
    """An operator acts on a refusal (or after a stop) without waiting for the lease to run out."""
    import asyncio

    from services.tlog.integrator import Integrator

    await append_drafts(claim_log, 3)
    store = await TlogStore.open(claim_log.nc, "CLAIMS")
    first = Ed25519Signer.generate(ORIGIN)
    stop = asyncio.Event()
    running = asyncio.create_task(Integrator(claim_log.nc, store, first, holder="one", interval=0.05, lease_seconds=60).run(stop))
    async with asyncio.timeout(30):
        while (await store.checkpoint())[0] is None:
            await asyncio.sleep(0.05)
    assert (await store.lease()).until > 0
    stop.set()
    await running
    assert (await store.lease()).until == 0
    other = Integrator(claim_log.nc, store, Ed25519Signer.generate(ORIGIN), holder="two", lease_seconds=60)
    with pytest.raises(Refused, match="a log's key never changes"):
        await other.run(asyncio.Event())
    assert (await store.lease()).until == 0

