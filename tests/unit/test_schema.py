"""The committed JSON Schemas are the contract producers in other languages read: they must match the models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events.registry import EVENT_TYPES
from events.schema import event_schemas
from services.commands.models import COMMAND_TYPES, command_schemas

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


@pytest.mark.parametrize(("kind", "generate"), [("events", event_schemas), ("commands", command_schemas)])
def test_committed_schemas_match_the_models(kind, generate):
    generated = generate()
    committed = {path.stem: json.loads(path.read_text()) for path in (SCHEMAS / kind).glob("*.json")}
    stale = sorted(name for name in generated if committed.get(name) != generated[name])
    assert not stale, f"run `claimlog schema export` and commit: {kind} schemas out of date for {stale}"
    assert set(committed) == set(generated)


def test_every_event_type_has_a_schema_with_its_envelope():
    for name in EVENT_TYPES:
        schema = event_schemas()[name]
        assert {"event_id", "type", "claim_id", "occurred_at", "actor"} <= set(schema["required"])


def test_a_command_schema_has_no_envelope_so_no_one_can_claim_to_be_someone_else():
    for name in COMMAND_TYPES:
        properties = set(command_schemas()[name]["properties"])
        assert "claim_id" in properties and "command" in properties
        assert not properties & {"actor", "occurred_at", "prev_hash", "schema_version", "type"}, name


def test_the_committed_asyncapi_document_matches_the_event_models():
    from services.asyncapi import asyncapi_document

    committed = json.loads((SCHEMAS / "asyncapi.json").read_text())
    assert committed == json.loads(json.dumps(asyncapi_document())), "run `claimlog schema export` and commit"
    assert {c["address"] for c in committed["channels"].values()} == {f"claims.{{claim_id}}.{t}" for t in EVENT_TYPES}
