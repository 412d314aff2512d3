"""Page snapshots: an as-of read that starts from the claim's last snapshot gives the page a fold from its
first event gives, at every point of a long claim; the API reads from it, and verify catches a snapshot changed
behind the projector."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, select, text

from events import Actor, Event
from projections.claim_pages import SNAPSHOT_EVERY
from projections.page_model import PAGE
from projections.tables import claim_pages, page_snapshots
from services.log import ClaimLog
from services.timeline.as_of import AsOf, latest_snapshot, page_json_as_of
from tests.builders import answered, attached, corrected, drafted, filed, resolved, reviewed, withdrawn
from tests.conftest import random_claim_id
from tests.integration.audit_log import verify_json
from tests.integration.command_api import Api
from tests.integration.test_projector import append_history, project_all

JUDGE = Actor(id="reviewer-bot", kind="model", model="judge-2")
LONG = 3 * SNAPSHOT_EVERY - 7  # two snapshots, and events after the last (fewer than SNAPSHOT_EVERY)


def long_life(claim_id: str) -> list[Event]:
    """A claim of ``LONG`` events of every kind that changes its page."""
    events: list[Event] = [drafted(claim_id)]
    n = 0
    while len(events) < LONG:
        n += 1
        step = [
            attached(claim_id, f"s{n}", "validates" if n % 3 else "contradicts"),
            corrected(claim_id, f"s{n}", measured=f"Measured again, {n}."),
            filed(claim_id, f"d{n}"),
            answered(claim_id, f"d{n}"),
            resolved(claim_id, f"d{n}", "upheld" if n % 2 else "rejected"),
            reviewed(claim_id, f"r{n}", "person") if n % 4 == 0 else reviewed(claim_id, f"r{n}", "ai", actor=JUDGE),
        ]
        if n % 5 == 0:
            step.append(withdrawn(claim_id, f"s{n - 1}"))
        events.extend(step)
    return events[:LONG]


async def write_long_claim(claim_log: ClaimLog) -> tuple[str, list[int]]:
    """The long claim, appended 23 events at a time with another claim's events in between; its sequences."""
    claim, other = random_claim_id(), random_claim_id()
    await append_history(claim_log, other)
    life = long_life(claim)
    for start in range(0, len(life), 23):
        await append_history(claim_log, claim, life[start : start + 23])
        await append_history(claim_log, other, [attached(other, f"x{start}", "mentions")])
    return claim, [stored.seq for stored in await claim_log.read_claim(claim)]


async def test_an_as_of_read_from_a_snapshot_equals_the_fold_from_the_first_event(claim_log: ClaimLog, engine: Engine):
    claim, seqs = await write_long_claim(claim_log)
    await project_all(claim_log, engine, batch=37)  # snapshots fall inside batches, not at their ends

    with engine.connect() as conn:
        taken = conn.execute(select(page_snapshots.c.seq).where(page_snapshots.c.claim_id == claim).order_by("seq")).scalars().all()
        live = conn.execute(select(claim_pages.c.doc).where(claim_pages.c.claim_id == claim)).scalar_one()
    assert taken == [seqs[SNAPSHOT_EVERY - 1], seqs[2 * SNAPSHOT_EVERY - 1]]
    assert PAGE.validate_json(live).event_count == LONG

    S = SNAPSHOT_EVERY  # the snapshots' edges
    points = sorted({*seqs[::9], *(seqs[i] for i in (0, S - 2, S - 1, S, 2 * S - 2, 2 * S - 1, 2 * S)), seqs[-1], seqs[5] + 1})
    for seq in points:
        from_first = await page_json_as_of(claim_log, claim, AsOf(seq=seq))
        from_snapshot = await page_json_as_of(claim_log, claim, AsOf(seq=seq), snapshots=engine)
        assert from_snapshot == from_first, f"as of sequence {seq}"
    assert await page_json_as_of(claim_log, claim, None, snapshots=engine) == live.encode()

    # By time: the snapshot taken at or before the moment, and the events stored up to it.
    stored = await claim_log.read_claim(claim)
    for i in (SNAPSHOT_EVERY - 2, SNAPSHOT_EVERY - 1, SNAPSHOT_EVERY + SNAPSHOT_EVERY // 2, LONG - 1):
        for moment in (stored[i].stored_at, stored[i].stored_at - timedelta(microseconds=1)):
            point = AsOf(at=moment)
            assert await page_json_as_of(claim_log, claim, point, snapshots=engine) == await page_json_as_of(claim_log, claim, point)
    before = latest_snapshot(engine, claim, AsOf(at=stored[SNAPSHOT_EVERY - 1].stored_at - timedelta(microseconds=1)))
    assert before is None
    assert latest_snapshot(engine, claim, AsOf(seq=seqs[-1])).seq == taken[-1]
    # Between the two snapshots by time: the read stops at the second, stored after the moment.
    between = latest_snapshot(engine, claim, AsOf(at=stored[SNAPSHOT_EVERY + SNAPSHOT_EVERY // 2].stored_at))
    assert (between.seq, between.read_up_to) == (taken[0], taken[1])
    assert latest_snapshot(engine, claim, AsOf(at=stored[-1].stored_at)).read_up_to is None


async def test_the_api_reads_from_the_snapshot_and_verify_names_a_snapshot_changed_behind_the_projector(
    nats_url: str, claim_log: ClaimLog, engine: Engine, api: Api, tmp_path: Path
):
    claim, seqs = await write_long_claim(claim_log)
    await api.page(claim, after=seqs[-1])  # the API's projector has applied the whole claim
    point = AsOf(seq=seqs[SNAPSHOT_EVERY + 5])

    async def as_of_page() -> dict:
        response = await api.http.get(f"/claims/{claim}", params={"as_of_seq": point.seq})
        assert response.status_code == 200, response.text
        return response.json()

    honest = await as_of_page()
    assert honest["statement"] == f"Statement of {claim}." and honest["event_count"] == SNAPSHOT_EVERY + 6

    with engine.begin() as conn:
        conn.execute(
            text("UPDATE page_snapshots SET doc = replace(doc, :old, :new) WHERE claim_id = :c"),
            {"old": f"Statement of {claim}.", "new": "A statement nobody wrote.", "c": claim},
        )
    assert (await as_of_page())["statement"] == "A statement nobody wrote."  # the API folded from the snapshot
    from_log = PAGE.validate_json(await page_json_as_of(claim_log, claim, point))
    assert from_log.statement == f"Statement of {claim}."  # the log alone still says what happened

    code, report = verify_json(nats_url=nats_url, database_url=engine.url.render_as_string(hide_password=False), cwd=tmp_path)
    assert code == 1
    assert [(f["kind"], f.get("table")) for f in report["findings"]] == [("table", "page_snapshots")]
