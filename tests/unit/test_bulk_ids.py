"""The event ids a bulk ingest derives from its lines never change: a file ingested again, by any version,
derives the ids it was published under and publishes nothing new. These are ids published before."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from events import Actor
from events.envelope import EVENT_ID_PATTERN
from services.commands.models import parse_command
from services.ingest.bulk_lines import Parsed, iter_commands, with_event_id

BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")
LINE = b'{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "r"}'
OTHER = b'{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "s"}'


def derived(actor: Actor, lines: list[bytes], copies: Counter[int] | None = None) -> list[str]:
    copies = Counter() if copies is None else copies
    return [with_event_id(Parsed(n, parse_command(raw), raw), actor, copies).event_id for n, raw in enumerate(lines, 1)]


def test_a_lines_id_comes_from_its_actor_its_bytes_and_how_many_copies_came_before():
    assert derived(BOT, [LINE, OTHER, LINE, LINE]) == [
        "6548c47e-da57-8584-a739-256af4ad8f31",
        "ab3b82b8-0aca-8c1d-a5fb-da1924daafa4",
        "c790d04f-e614-8e5d-8f57-1d299fff61bf",  # the second copy of the first line
        "22602571-337a-813a-be95-994711593eb7",
    ]
    assert derived(Actor(id="someone", kind="person"), [LINE]) == ["b5291fcb-cf3f-8eb5-bbff-ffd793cfbcbb"]


def test_the_copies_are_counted_across_calls_in_the_claims_counter():
    copies: Counter[int] = Counter()
    assert derived(BOT, [LINE], copies) + derived(BOT, [LINE], copies) == derived(BOT, [LINE, LINE])


def test_a_lines_own_event_id_is_kept():
    own = b'{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "r", "event_id": "0190a000-0000-7000-8000-00000000c0de"}'
    assert derived(BOT, [own]) == ["0190a000-0000-7000-8000-00000000c0de"]


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=5))
def test_a_derived_id_is_one_the_envelope_takes(raw: bytes, before: int):
    # a bulk ingest vouches for its events' envelopes (``services/ingest/bulk_events.py``): its derived ids must pass the event's pattern
    copies = Counter({hash(raw): before})
    event_id = with_event_id(Parsed(1, parse_command(LINE), raw), BOT, copies).event_id
    assert re.fullmatch(EVENT_ID_PATTERN, event_id)


def test_a_line_read_keeps_its_number_bytes_command_and_id_each_in_its_own_field(tmp_path):
    # ``Parsed`` and ``Line`` are made as the tuples they are, values in the order of their fields: held here by name.
    path = tmp_path / "commands.jsonl"
    path.write_bytes(b"\n" + LINE + b"  \n")
    [parsed] = list(iter_commands(path))
    assert (parsed.number, parsed.raw, parsed.command) == (2, LINE, parse_command(LINE))
    line = with_event_id(parsed, BOT, Counter())
    assert (line.number, line.command, line.event_id) == (2, parsed.command, "6548c47e-da57-8584-a739-256af4ad8f31")
