"""An event stored again as a new message (past JetStream's duplicate window, or under another message id)
is folded once, wherever it arrives: the repeat is recorded as unreadable with where its id was first
folded, every reader of the claim skips it, verify names it, and a replay builds the same tables."""

from __future__ import annotations

import uuid

import nats
from sqlalchemy import Engine, func, select

from projections.checksum import table_checksums
from projections.claim_pages import SNAPSHOT_EVERY
from projections.page_model import PAGE
from projections.repeats import repeat_reason
from projections.tables import contributor_activity, folded_events, page_snapshots, unreadable_events
from services.audit.rebuild import compare_read_models
from services.audit.verify import Report
from services.log import ClaimLog, StoredEvent
from services.read_api.queries import claim_page
from services.timeline.as_of import page_json_as_of
from services.timeline.history import claim_history
from tests.builders import BOT, PERSON, attached, drafted, filed, withdrawn
from tests.integration.test_projector import append_history, project_all


async def store_again(nats_url: str, claim_log: ClaimLog, stored: StoredEvent) -> int:
    """Publish an event's stored bytes again under a fresh Nats-Msg-Id, as a producer replaying its
    log after the duplicate window would: JetStream stores it as a new message."""
    raw = await nats.connect(nats_url)
    try:
        subject = claim_log.layout.publish_subject(stored.event.claim_id, stored.event.type)
        ack = await raw.jetstream().publish(subject, stored.data, headers={"Nats-Msg-Id": str(uuid.uuid4())})
    finally:
        await raw.close()
    assert not ack.duplicate
    return ack.seq


async def test_an_event_stored_again_is_folded_once_recorded_as_a_repeat_and_replayed_alike(
    nats_url: str, claim_log: ClaimLog, engine: Engine, replay_engine: Engine, claim_id: str
):
    # Enough events for a snapshot of the page, so that an as-of read starts after the first attach.
    events = [drafted(claim_id), *(attached(claim_id, f"s{n}") for n in range(1, SNAPSHOT_EVERY)), withdrawn(claim_id, "s1")]
    await append_history(claim_log, claim_id, events)
    await project_all(claim_log, engine, batch=7)
    before = await claim_log.read_claim(claim_id)
    with engine.connect() as conn:
        page_before = claim_page(conn, claim_id)
    draft, first_attach = before[0], before[1]
    # Stored again after the projector folded them: the attach (it would bring back the withdrawn
    # source), then the draft, then the attach a second time.
    again = [await store_again(nats_url, claim_log, item) for item in (first_attach, draft, first_attach)]
    await project_all(claim_log, engine, batch=7)

    with engine.connect() as conn:
        page = claim_page(conn, claim_id)
        unreadable = conn.execute(select(unreadable_events.c.seq, unreadable_events.c.reason).order_by(unreadable_events.c.seq)).all()
        activity = conn.execute(select(func.count()).select_from(contributor_activity).where(contributor_activity.c.claim_id == claim_id)).scalar()
        folded = conn.execute(select(func.count()).select_from(folded_events).where(folded_events.c.claim_id == claim_id)).scalar()
        snapshots = conn.execute(select(func.count()).select_from(page_snapshots).where(page_snapshots.c.claim_id == claim_id)).scalar()
    assert PAGE.dump_json(page) == PAGE.dump_json(page_before)
    assert page.event_count == len(events) and page.counts.sources_active == len(events) - 3 and page.counts.sources_withdrawn == 1
    assert activity == folded == len(events) and snapshots == 1
    expected = [
        (again[0], repeat_reason(first_attach.event.event_id, first_attach.seq)),
        (again[1], repeat_reason(draft.event.event_id, draft.seq)),
        (again[2], repeat_reason(first_attach.event.event_id, first_attach.seq)),
    ]
    assert [tuple(row) for row in unreadable] == expected

    # Every reader of the claim skips the repeats as the projector does.
    stored = await claim_log.read_claim(claim_id)
    entries = claim_history(claim_id, stored)
    assert [(e.seq, e.unreadable) for e in entries if e.unreadable] == expected
    assert entries[-1].revision is None and entries[-4].revision == 1
    from_snapshot = await page_json_as_of(claim_log, claim_id, None, snapshots=engine)
    from_first = await page_json_as_of(claim_log, claim_id, None)
    assert PAGE.validate_json(from_snapshot) == PAGE.validate_json(from_first) == page

    # A replay folds the repeats of the same batch as their first events the same way.
    await project_all(claim_log, replay_engine, batch=1000, name="replay")
    with engine.connect() as live, replay_engine.connect() as replayed:
        assert table_checksums(live) == table_checksums(replayed)

    report = Report()
    await compare_read_models(claim_log, engine, report)
    assert [(f.kind, f.seq, f.claim_id, f.message) for f in report.findings] == [("repeat", seq, claim_id, why) for seq, why in expected]


async def test_one_event_id_sent_by_two_actors_is_two_events_and_each_actors_repeat_is_still_a_repeat(
    nats_url: str, claim_log: ClaimLog, engine: Engine, replay_engine: Engine, claim_id: str
):
    source = attached(claim_id, "s1", actor=BOT)
    dispute = filed(claim_id, "d1", actor=PERSON, event_id=source.event_id)  # another actor, the same id
    await append_history(claim_log, claim_id, [drafted(claim_id), source])
    await project_all(claim_log, engine, batch=1)
    await append_history(claim_log, claim_id, [dispute])  # folded in a later batch than the bot's id
    await project_all(claim_log, engine, batch=1)
    stored = await claim_log.read_claim(claim_id)
    again = await store_again(nats_url, claim_log, stored[2])
    await project_all(claim_log, engine)

    with engine.connect() as conn:
        page = claim_page(conn, claim_id)
        unreadable = conn.execute(select(unreadable_events.c.seq, unreadable_events.c.reason)).all()
        folded = conn.execute(
            select(folded_events.c.actor_id, folded_events.c.seq).where(folded_events.c.event_id == source.event_id).order_by(folded_events.c.seq)
        ).all()
    assert [s.source_id for s in page.sources] == ["s1"] and [d.disagreement_id for d in page.disagreements] == ["d1"]
    assert page.event_count == 3
    assert [tuple(row) for row in folded] == [(BOT.id, stored[1].seq), (PERSON.id, stored[2].seq)]
    assert [tuple(row) for row in unreadable] == [(again, repeat_reason(dispute.event_id, stored[2].seq))]
    entries = claim_history(claim_id, await claim_log.read_claim(claim_id))
    assert [(e.seq, e.unreadable) for e in entries if e.unreadable] == [(again, repeat_reason(dispute.event_id, stored[2].seq))]

    await project_all(claim_log, replay_engine, batch=1000, name="replay")
    with engine.connect() as live, replay_engine.connect() as replayed:
        assert table_checksums(live) == table_checksums(replayed)
