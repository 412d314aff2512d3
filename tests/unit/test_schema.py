"""The committed JSON Schemas are the contract producers in other languages read: they must match the models."""

from __future__ import annotations

import json
from pathlib import Path

from events.registry import EVENT_TYPES
from events.schema import event_schemas

COMMITTED = Path(__file__).resolve().parents[2] / "schemas" / "events"


def test_committed_schemas_match_the_event_models():
    generated = event_schemas()
    committed = {path.stem: json.loads(path.read_text()) for path in COMMITTED.glob("*.json")}
    stale = sorted(name for name in generated if committed.get(name) != generated[name])
    assert not stale, f"run `claimlog schema export` and commit: schemas out of date for {stale}"
    assert set(committed) == set(generated)


def test_every_event_type_has_a_schema_with_its_envelope():
    for name in EVENT_TYPES:
        schema = event_schemas()[name]
        assert {"event_id", "type", "claim_id", "occurred_at", "actor"} <= set(schema["required"])
