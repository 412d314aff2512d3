"""The key registry's changes fold, with nothing but their bytes, into the registry they describe; a change
that contradicts the ones before it is named, and the registry's subject is one no claim can take."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from events import Actor
from events.envelope import CLAIM_ID_PATTERN, new_event_id
from events.key_registry import (
    KeyAdded,
    KeyRetired,
    RegistryChangeError,
    RegistryRecorded,
    SigningRequired,
    decode_change,
    encode_change,
    fold_registry,
)
from events.subjects import REGISTRY, LogLayout, claim_and_type, is_registry_subject

BOT = Actor(id="source-bot", kind="service")
AT = datetime(2026, 12, 7, 11, 0, tzinfo=UTC)
KEY = "0123456789abcdef0123456789abcdef"
PUBLIC = "A" * 43


def _added(key_id: str = KEY) -> KeyAdded:
    return KeyAdded(event_id=new_event_id(), occurred_at=AT, key_id=key_id, actor=BOT, public_key=PUBLIC)


def test_changes_fold_into_keys_retirements_and_the_requirement_from_their_bytes_alone():
    changes = [_added(), _added("f" * 32), KeyRetired(event_id=new_event_id(), occurred_at=AT, key_id=KEY, retired_after=7),
               SigningRequired(event_id=new_event_id(), occurred_at=AT, required_after=9)]
    state = fold_registry(decode_change(encode_change(change)) for change in changes)
    assert [(k.key_id, k.retired_after, k.retired_at) for k in state.keys] == [(KEY, 7, AT), ("f" * 32, None, None)]
    assert (state.required_after, state.required_set_at) == (9, AT)


@pytest.mark.parametrize(("changes", "why"), [
    ([_added(), _added()], "already registered"),
    ([KeyRetired(event_id=new_event_id(), occurred_at=AT, key_id=KEY, retired_after=1)], "not a current key"),
    ([_added(), RegistryRecorded(event_id=new_event_id(), occurred_at=AT)], "only ever a registry's first change"),
    ([SigningRequired(event_id=new_event_id(), occurred_at=AT, required_after=0)] * 2, "already required"),
])
def test_a_change_that_contradicts_the_ones_before_it_is_named(changes, why):
    with pytest.raises(RegistryChangeError, match=why):
        fold_registry(changes)


@pytest.mark.parametrize(("data", "why"), [
    (b"{not json", "not JSON"),
    (b'{"type": "ClaimDrafted"}', "not a registry change"),
    (b'{"type": "SigningRequired", "schema_version": 2}', "version 2"),
    (b'{"type": "SigningRequired", "event_id": "x"}', "event_id"),
])
def test_bytes_that_are_not_a_registry_change_say_why(data, why):
    with pytest.raises(RegistryChangeError, match=why):
        decode_change(data)


def test_the_registrys_subject_is_reserved_and_stored_in_a_partition_like_a_claims():
    import re

    assert not re.match(CLAIM_ID_PATTERN, REGISTRY)
    for layout in (LogLayout(), LogLayout("reg2", 4), LogLayout(partitions=0)):
        stored = layout.stored_subject(REGISTRY, "KeyAdded")
        assert layout.registry_subject("KeyAdded") == layout.publish_subject(REGISTRY, "KeyAdded")
        assert is_registry_subject(stored) and layout.is_registry(stored) and claim_and_type(stored) == (REGISTRY, "KeyAdded")
        assert layout.parse(stored)[0] == layout.partition_of(REGISTRY)
        assert not is_registry_subject(layout.stored_subject("CLM-0338", "ClaimDrafted"))
