"""The gate holds for every reader of the log: what a holder of a publish credential can put in the log
(junk with a store time of its choosing, forged and unsigned events) is refused alike by the projector,
the as-of pages, the past scorecard, history, the write side, export and ``verify``."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

from events import Actor, encode
from services.admission import gate_for
from services.audit.export import _parse, export_log
from services.audit.verify import Report, check_log
from services.identity.keys import KeyRing
from services.ingest.pages import import_page, read_page, sample_pages
from services.log import ClaimLog, StreamSpec, connect
from services.log.connection import RESTORED_TIME
from services.runtime.embedded import EmbeddedNats
from services.timeline.as_of import page_json_as_of
from services.timeline.history import claim_history
from tests.builders import attached, drafted, filed, retracted
from tests.builders.raw import publish_raw
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, Api, draft, running_api

API_ACTOR = Actor(id="claimlog-api", kind="service")
ALICE, BOB = ACTORS["ada"], ACTORS["grace"]


async def _report(claim_log: ClaimLog) -> Report:
    report = Report()
    await check_log(claim_log, report, head=await claim_log.head())
    return report


async def _junk(nc, claim: str, stored_at: str) -> int:
    """What a producer credential may publish: any bytes, any headers."""
    ack = await nc.jetstream().publish(f"claims.{claim}.Junk", b"junk", headers={RESTORED_TIME: stored_at})
    return ack.seq


async def test_junk_with_an_unreadable_store_time_stops_no_reader_and_blocks_no_claim(tmp_path: Path, engine: Engine):
    server = EmbeddedNats(tmp_path / "nats")
    server.start()
    try:
        admin = await connect(server.url_for("admin"))
        producer = await connect(server.url_for("producer"))
        claim_log = ClaimLog(admin, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        async for api in running_api(claim_log, engine):
            claim = random_claim_id()
            assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
            junk = await _junk(producer, claim, "yesterday")
            far = await _junk(producer, claim, "9999-12-31T23:59:59-14:00")  # an offset past the last time in UTC
            # The write side counts every stored message of the claim: the next command expects the right sequence.
            sent = await api.send("attach_source", "bot", claim_id=claim, source_id="s1", relation="validates", measured="x")
            assert sent.status_code == 201, sent.text
            last = sent.json()["last_seq"]
            page = await api.page(claim, after=last)  # the projector went on past the junk
            assert [s["source_id"] for s in page["sources"]] == ["s1"]
            assert (await api.http.get("/health/ready")).status_code == 200

            history = (await api.http.get(f"/claims/{claim}/history")).json()["events"]
            refused = {e["seq"]: e for e in history if e["unreadable"]}
            assert sorted(refused) == [junk, far]
            assert "Claimlog-Stored-At cannot be read" in refused[junk]["unreadable"] and refused[junk]["actor"] is None
            assert "outside the times" in refused[far]["unreadable"]
            as_of = (await api.http.get(f"/claims/{claim}", params={"as_of_seq": last})).json()
            assert as_of["sources"] == page["sources"] and as_of["event_count"] == page["event_count"]

            report = await _report(claim_log)
            assert "gap" not in report.counts, report.findings
            assert {f.seq: f.kind for f in report.findings if f.seq in (junk, far)} == {junk: "time", far: "time"}
            out = io.StringIO()
            assert await export_log(claim_log, out) == await claim_log.head()  # export (and so backup) keeps it
            lines = {json.loads(line)["seq"]: line for line in out.getvalue().splitlines()}
            assert json.loads(lines[junk])["stored_at_header"] == "yesterday"
            assert _parse(lines[junk])[1].stored_at == "yesterday"  # an import stores it as it was: refused there too
        await producer.close()
        await admin.close()
    finally:
        server.stop()


async def test_a_store_time_later_than_the_servers_freezes_no_view_of_the_past(api: Api):
    claim, later = random_claim_id(), random_claim_id()
    await api.send("draft_claim", "ada", **draft(claim))
    future = await _junk(api.log.nc, claim, "9999-12-31T23:59:59.999999Z")
    last = (await api.send("draft_claim", "ada", **draft(later))).json()["last_seq"]
    await api.page(later, after=last)
    now = datetime.now(UTC).isoformat()
    listed = (await api.http.get("/claims", params={"as_of": now, "limit": 100})).json()
    assert later in {c["claim_id"] for c in listed["items"]} and listed["as_of_seq"] >= last
    assert (await api.http.get("/scorecard", params={"as_of": now})).json()["applied_seq"] >= last
    [entry] = [e for e in (await api.http.get(f"/claims/{claim}/history")).json()["events"] if e["seq"] == future]
    assert "later than the server stored it" in entry["unreadable"]


async def test_forged_events_are_refused_by_every_reader_of_the_log(claim_log: ClaimLog, engine: Engine):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    delegate, _ = await ring.add(API_ACTOR, delegate=True)
    producer, _ = await ring.add(ACTORS["bot"])
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=delegate)
    async for api in running_api(signed, engine):
        claim = random_claim_id()
        await api.send("draft_claim", "ada", **draft(claim))
        good = (await api.send("attach_source", "grace", claim_id=claim, source_id="s1", relation="validates", measured="x")).json()
        honest = await api.page(claim, after=good["last_seq"])
        [stored] = [s for s in await signed.read_claim(claim) if s.seq == good["last_seq"]]
        forged = [await publish_raw(signed, claim, filed(claim, f"d{n}", actor=BOB)) for n in range(3)]  # unsigned, "by bob"
        changed = attached(claim, "s1", actor=BOB, measured="changed")  # alice's (the API's) signature on a changed body
        forged.append(await publish_raw(signed, claim, changed, {**stored.signature}))
        forged.append(await publish_raw(signed, claim, filed(claim, "d9", actor=BOB), signer=producer))  # a producer's key for bob
        forged.append(await publish_raw(signed, claim, retracted(claim, actor=ALICE)))  # unsigned retraction "by alice"
        head = forged[-1]

        # The write side: a forged retraction closes nothing.
        sent = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d1", argument="Too few backbones.")
        assert sent.status_code == 201, sent.text
        sent = await api.send("attach_source", "grace", claim_id=claim, source_id="s2", relation="supports", measured="y")
        assert sent.status_code == 201, sent.text
        await api.page(claim, after=sent.json()["last_seq"])
        ghost = random_claim_id()
        ghost_seq = await publish_raw(signed, ghost, drafted(ghost, actor=BOB))  # an unsigned draft "by bob" makes no claim to refer to
        related = await api.send("relate_claims", "ada", claim_id=claim, related_claim_id=ghost)
        assert related.status_code == 404 and related.json()["error"] == "claim_not_found", related.text

        for params in ({"as_of_seq": head}, {"as_of": datetime.now(UTC).isoformat()}):
            past = (await api.http.get(f"/claims/{claim}", params={"as_of_seq": head} if "as_of_seq" in params else params)).json()
            if "as_of_seq" in params:
                assert past["sources"] == honest["sources"] and past["disagreements"] == []
            assert past["status"]["lifecycle"] == "active"
            assert [d["disagreement_id"] for d in past["disagreements"]] in ([], ["d1"])
        html = (await api.http.get(f"/pages/claims/{claim}", params={"as_of_seq": head})).text
        assert "changed" not in html and "etracted" not in html
        entries = {e["seq"]: e for e in (await api.http.get(f"/claims/{claim}/history")).json()["events"]}
        for seq in forged:
            assert entries[seq]["actor"] is None and entries[seq]["unreadable"], entries[seq]
        past = (await api.http.get("/scorecard", params={"as_of_seq": head})).json()
        live = (await api.http.get("/scorecard", params={"after": head})).json()
        mine = [c for c in past["capabilities"] if c["capability"] == draft(claim)["capability"]]
        assert mine and mine == [c for c in live["capabilities"] if c["capability"] == draft(claim)["capability"]]
        feed = (await api.http.get("/events", params={"after": forged[0] - 1, "limit": len(forged)})).json()["events"]
        assert [e["seq"] for e in feed if e["refused"]] == forged  # a frontend's cache of the feed can tell them apart
        report = await _report(claim_log)
        assert {f.seq for f in report.findings if f.kind == "signature"} == {*forged, ghost_seq}


async def test_a_rotated_key_speaks_up_to_its_retirement_sequence_whatever_store_time_a_publisher_sets(claim_log: ClaimLog, engine: Engine):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    old, _ = await ring.add(ACTORS["bot"])
    await ring.require(await claim_log.head())
    claim = random_claim_id()
    mine = ClaimLog(claim_log.nc, StreamSpec("CLAIMS"), signer=old)
    before = await mine.append(claim, [drafted(claim, actor=ACTORS["bot"])], expected_seq=0, prev_hash=None)
    rotated_at = datetime.now(UTC)
    _, _, [retired] = await ring.rotate(ACTORS["bot"].id, after_seq=await claim_log.head())
    assert retired.retired_after == before.last_seq
    # The old key after its retirement, its store time set to just before the rotation.
    head = await claim_log.claim_head(claim)
    data = encode(attached(claim, "late", actor=ACTORS["bot"]).model_copy(update={"prev_hash": head.hash}))
    stamp = (rotated_at.replace(microsecond=0)).strftime("%Y-%m-%dT%H:%M:%SZ")
    late = (await claim_log.nc.jetstream().publish(
        claim_log.layout.publish_subject(claim, "SourceAttached"), data, headers={**old.headers([data])[0], RESTORED_TIME: stamp},
    )).seq

    [stored] = [s for s in await claim_log.read_claim(claim) if s.seq == late]
    assert stored.time_problem is None and stored.stored_at <= rotated_at  # a store time a reader can read
    page = await page_json_as_of(claim_log, claim, None)
    assert page is not None and json.loads(page)["sources"] == []
    entries = claim_history(claim, await claim_log.read_claim(claim), gate=await gate_for(claim_log))
    assert "retired after sequence" in entries[-1].unreadable
    report = await _report(claim_log)
    assert [(f.seq, f.kind) for f in report.findings if f.kind == "signature"] == [(late, "signature")]


async def test_a_page_import_reads_its_claim_through_the_gate_past_junk(claim_log: ClaimLog):
    page = read_page(sample_pages()[0])
    first = await import_page(claim_log, page)
    assert first.error is None and first.published
    junk = await _junk(claim_log.nc, page.claim_id, "yesterday")
    again = await import_page(claim_log, page)  # the page is in the log already: nothing to add, junk or not
    assert again.error is None and again.published == 0 and await claim_log.head() == junk
