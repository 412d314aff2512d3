"""Schema evolution: events of the version before in a real log read as the next through an upcaster, and the
log's bytes never change. (SourceAttached is at version 3; a version 4 is made up here.)"""

from __future__ import annotations

import json
from typing import Annotated, Union

import pytest
from pydantic import Field, TypeAdapter
from sqlalchemy import Engine, select

from events import decode, registry
from events.envelope import Text
from events.source import SourceAttached
from projections import claim_page
from projections.registry import build_projections
from projections.tables import unreadable_events
from services.log import ClaimLog
from services.projector import Projector
from services.read_api.queries import claim_page as read_page
from services.timeline.as_of import fold_page
from tests.builders import BOT, _envelope, attached, drafted
from tests.conftest import random_claim_id


class SourceAttachedV4(SourceAttached):
    """Version 4: what was measured, and the benchmark it was measured on, apart (version 3 had one sentence)."""

    schema_version: int = Field(default=4, ge=1)
    measured: Text = Field(description="What was measured, without the benchmark.")
    benchmark: Text = Field(description="The benchmark it was measured on.")


def split_measured(raw: dict) -> dict:
    """SourceAttached v3 -> v4: "Accuracy on GSM8K" becomes measured "Accuracy", benchmark "GSM8K"."""
    measured, _, benchmark = raw["measured"].partition(" on ")
    return {**raw, "measured": measured, "benchmark": benchmark or "not named"}


def use_v4(monkeypatch: pytest.MonkeyPatch, upcaster) -> None:
    """What a release with SourceAttached v4 changes: the model, its version, the upcaster from v3, and the
    projection's handler for the (new) class."""
    monkeypatch.setitem(registry.EVENT_TYPES, "SourceAttached", SourceAttachedV4)
    classes = tuple(registry.EVENT_TYPES.values())
    monkeypatch.setattr(registry, "_ADAPTER", TypeAdapter(Annotated[Union[classes], Field(discriminator="type")]))  # noqa: UP007
    monkeypatch.setitem(registry.CURRENT_VERSION, "SourceAttached", 4)
    monkeypatch.setitem(registry.UPCASTERS, ("SourceAttached", 3), upcaster)
    monkeypatch.setitem(claim_page.HANDLERS, SourceAttachedV4, claim_page.HANDLERS[SourceAttached])


async def write_older(claim_log: ClaimLog, claim: str) -> int:
    events = [
        drafted(claim),
        attached(claim, "s1", measured="Accuracy on GSM8K"),
        attached(claim, "s2", relation="supports", measured="Exact match"),
    ]
    return (await claim_log.append(claim, events, expected_seq=0, prev_hash=None)).last_seq


async def replay(claim_log: ClaimLog, engine: Engine) -> None:
    projector = Projector(claim_log, engine, build_projections(), name="replay-v4", batch=1000)
    await projector.run_until(await claim_log.head())


async def test_older_events_replay_as_the_next_version_through_the_upcaster_and_their_stored_bytes_stay(
    monkeypatch: pytest.MonkeyPatch, claim_log: ClaimLog, engine: Engine
):
    claim = random_claim_id()
    await write_older(claim_log, claim)
    stored_older = {s.seq: s.data for s in await claim_log.read_claim(claim)}
    assert [json.loads(data)["schema_version"] for data in stored_older.values()] == [2, 3, 3]

    use_v4(monkeypatch, split_measured)
    head = await claim_log.claim_head(claim)
    fields = {"source_id": "s3", "relation": "contradicts", "measured": "F1", "benchmark": "SQuAD"}
    v4_event = SourceAttachedV4(**_envelope(claim, BOT, fields))
    await claim_log.append(claim, [v4_event], expected_seq=head.seq, prev_hash=head.hash)
    await replay(claim_log, engine)

    with engine.connect() as conn:
        page = read_page(conn, claim)
        assert conn.execute(select(unreadable_events)).all() == []
    sources = {s.source_id: s for s in page.sources}
    assert (sources["s1"].measured, sources["s2"].measured, sources["s3"].measured) == ("Accuracy", "Exact match", "F1")
    stored = await claim_log.read_claim(claim)
    upcast = decode(stored[1].data)
    assert isinstance(upcast, SourceAttachedV4) and upcast.schema_version == 4 and upcast.benchmark == "GSM8K"
    assert decode(stored[2].data).benchmark == "not named"
    # Never rewritten: the older events are the same bytes, and the v4 event went in as version 4.
    assert {s.seq: s.data for s in stored[:3]} == stored_older
    assert json.loads(stored[1].data)["measured"] == "Accuracy on GSM8K"
    assert json.loads(stored[3].data) | {"schema_version": 4, "benchmark": "SQuAD"} == json.loads(stored[3].data)
    assert decode(stored[3].data).model_dump(exclude={"prev_hash"}) == v4_event.model_dump(exclude={"prev_hash"})
    # The past read from the log folds the same upcast values.
    assert [s.measured for s in fold_page(claim, stored).sources] == ["Accuracy", "Exact match", "F1"]


async def test_an_event_its_upcaster_cannot_read_is_recorded_unreadable_and_the_replay_goes_on(
    monkeypatch: pytest.MonkeyPatch, claim_log: ClaimLog, engine: Engine
):
    claim = random_claim_id()
    last = await write_older(claim_log, claim)

    def strict(raw: dict) -> dict:
        measured, benchmark = raw["measured"].split(" on ")  # "Exact match" names no benchmark: ValueError
        return {**raw, "measured": measured, "benchmark": benchmark}

    use_v4(monkeypatch, strict)
    await replay(claim_log, engine)
    with engine.connect() as conn:
        page = read_page(conn, claim)
        [(seq, reason)] = conn.execute(select(unreadable_events.c.seq, unreadable_events.c.reason)).all()
    assert [s.source_id for s in page.sources] == ["s1"] and page.as_of_seq == last - 1
    assert seq == last and "SourceAttached schema_version 3 could not be upcast: ValueError" in reason
