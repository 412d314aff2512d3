"""JSON Schemas of the events: the contract a producer in any language publishes against."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from events.key_registry import REGISTRY_TYPES, AnyRegistryChange
from events.registry import EVENT_TYPES, AnyEvent
from events.subjects import ALL_EVENTS, REGISTRY


def event_schemas() -> dict[str, dict[str, Any]]:
    """One JSON Schema per event type, plus ``AnyEvent`` (the discriminated union); the same for the key
    registry's changes (``AnyRegistryChange``), which only the admin publishes."""
    schemas = {name: _with_type_required(cls.model_json_schema()) for name, cls in EVENT_TYPES.items()}
    union = TypeAdapter(AnyEvent).json_schema()
    union["description"] = f"Any claimlog event, as published on claims.<claim_id>.<type> and stored on the subjects {ALL_EVENTS} (claims.<partition>.<claim_id>.<type>)."
    schemas["AnyEvent"] = union
    schemas |= {name: _with_type_required(cls.model_json_schema()) for name, cls in REGISTRY_TYPES.items()}
    changes = TypeAdapter(AnyRegistryChange).json_schema()
    changes["description"] = f"Any change of the key registry, as the admin publishes it on claims.{REGISTRY}.<type> (a claim token no claim id can take)."
    schemas["AnyRegistryChange"] = changes
    return schemas


def _with_type_required(schema: dict[str, Any]) -> dict[str, Any]:
    # Python fills ``type`` in by default; on the wire it is what tells events apart.
    schema["required"] = ["type", *schema.get("required", [])]
    return schema
