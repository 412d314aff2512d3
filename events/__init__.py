"""The published contract of claimlog: every fact the log can hold, as frozen pydantic models.

Nothing here does I/O or imports a framework: producers in any language rely on these shapes
(``claimlog schema export`` writes them as JSON Schema).
"""

from events.envelope import Actor, ActorKind, Event, new_event_id
from events.registry import EVENT_TYPES, AnyEvent, UnknownEventError, decode, encode

__all__ = [
    "EVENT_TYPES",
    "Actor",
    "ActorKind",
    "AnyEvent",
    "Event",
    "UnknownEventError",
    "decode",
    "encode",
    "new_event_id",
]
