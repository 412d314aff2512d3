"""The transparency log's entry (``events/log_entry.py``): canonical, versioned, and small enough for a bundle."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from events.log_entry import (
    MAX_ENTRY_BYTES,
    MAX_EVENT_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_SUBJECT_BYTES,
    EntryError,
    decode_entry,
    encode_entry,
    from_message,
)
from events.registry import encode
from services.commands import ClaimState, Kind, Rejected
from tests.unit.test_decide import CLAIM, when

STORED = datetime(2026, 12, 7, 11, 0, 0, 123456, tzinfo=UTC)
SIGNED = {
    "Claimlog-Signer": "0123456789abcdef0123456789abcdef",
    "Claimlog-Signature": "v1.c2lnbmF0dXJl",
    "Claimlog-Proof": "0/1",
    "Nats-Msg-Id": "m-1",
    "Nats-Expected-Last-Subject-Sequence": "4",
}


def test_an_entry_names_claim_type_time_and_the_meaningful_headers_only():
    entry = from_message("claims.7.CLM-0338.ClaimDrafted", STORED, SIGNED, b'{"x":1}')
    assert encode_entry(entry) == (
        b"claimlog/entry/v1\nclaim CLM-0338\ntype ClaimDrafted\nstored 2026-12-07T11:00:00.123456Z\n"
        b"header Claimlog-Signer: 0123456789abcdef0123456789abcdef\nheader Claimlog-Signature: v1.c2lnbmF0dXJl\n"
        b"header Claimlog-Proof: 0/1\nheader Nats-Msg-Id: m-1\n\n"
        b'{"x":1}'
    )
    assert decode_entry(encode_entry(entry)) == entry


def test_the_partition_and_the_time_zone_do_not_change_the_entry():
    partitioned = from_message("claims.7.CLM-1.ClaimDrafted", STORED, None, b"{}")
    plain = from_message("claims.CLM-1.ClaimDrafted", STORED.astimezone(timezone(timedelta(hours=2))), None, b"{}")
    assert encode_entry(partitioned) == encode_entry(plain)


def test_an_old_message_too_large_for_a_bundle_enters_with_its_body_hash():
    data = encode_entry(from_message("claims.CLM-1.ClaimDrafted", STORED, None, b"x" * 70_000))
    assert len(data) < 300 and b"body-sha256 " in data
    assert decode_entry(data).body_sha256 is not None and decode_entry(data).body == b""


def test_the_largest_message_the_stream_takes_fits_one_entry():
    headers = {name: "v" * 1_000 for name in SIGNED}
    claim, event_type = "C" * (MAX_SUBJECT_BYTES // 2 - 10), "T" * (MAX_SUBJECT_BYTES // 2 - 10)
    entry = from_message(f"claims.{claim}.{event_type}", STORED, headers, b"x" * (MAX_MESSAGE_BYTES - 4_200))
    assert len(encode_entry(entry)) <= MAX_ENTRY_BYTES and b"body-sha256" not in encode_entry(entry)
    assert MAX_EVENT_BYTES < MAX_MESSAGE_BYTES


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"claimlog/entry/v2\nclaim C\ntype T\nstored 2026-12-07T11:00:00.000000Z\n\n{}", "starts with"),
        (b"claimlog/entry/v1\nclaim C\ntype T\n\n{}", "lines 2 to 4"),
        (b"claimlog/entry/v1\nclaim C\ntype T\nstored 2026-12-07T11:00:00Z\n\n{}", "store time"),
        (b"claimlog/entry/v1\nclaim C\ntype T\nstored 2026-12-07T11:00:00.000000Z\nnonsense\n\n{}", "line 5"),
        (
            b"claimlog/entry/v1\nclaim C\ntype T\nstored 2026-12-07T11:00:00.000000Z\n"
            b"header Nats-Msg-Id: a\nheader Claimlog-Proof: 0/1\n\n{}",
            "in that order",
        ),
        (b"no blank line", "empty line"),
    ],
)
def test_bytes_that_are_no_entry_are_refused_with_the_reason(data, why):
    with pytest.raises(EntryError, match=why):
        decode_entry(data)


def test_a_draft_too_large_for_an_entry_is_refused_by_size_in_bytes():
    body = {"slug": "s", "statement": "é" * 19_000, "capability": "C", "observed_on": "ö" * 19_000}
    with pytest.raises(Rejected) as refused:
        when(ClaimState(CLAIM), "draft_claim", **body)
    assert refused.value.kind is Kind.INVALID and refused.value.reason == "event_too_large"
    assert "bytes of JSON" in refused.value.message and f"{MAX_EVENT_BYTES:,}" in refused.value.message
    body["observed_on"] = "ö" * 5_000
    [event] = when(ClaimState(CLAIM), "draft_claim", **body)
    assert len(encode(event)) <= MAX_EVENT_BYTES


def test_a_predecessor_entry_names_the_previous_key_and_checkpoint_and_is_no_event_entry():
    from events.log_entry import Predecessor, decode_predecessor, encode_predecessor

    note = "registry.test/first\n20\n" + "A" * 43 + "=\n\n\u2014 registry.test/first AAAAAA==\n"
    stated = Predecessor("registry.test/first+01234567+AXyz", note)
    data = encode_predecessor(stated)
    assert data.startswith(b"claimlog/predecessor/v1\nvkey registry.test/first+01234567+AXyz\n\n")
    assert decode_predecessor(data) == stated
    assert decode_predecessor(b"claimlog/entry/v1\nclaim C\n") is None  # an ordinary entry
    with pytest.raises(EntryError):
        decode_entry(data)  # never read as an event: it folds nowhere
    with pytest.raises(EntryError, match="its version line, 'vkey <verifier key>'"):
        decode_predecessor(data.replace(b"\n\n", b"\nsize 20\n\n", 1))
    with pytest.raises(EntryError, match="ends in a newline"):
        encode_predecessor(Predecessor(stated.vkey, note.rstrip("\n")))
    with pytest.raises(EntryError, match="does not fit"):
        encode_predecessor(Predecessor(stated.vkey, "x" * 70_000 + "\n"))


def test_a_tree_record_written_before_successors_reads_as_a_first_log():
    import json

    from services.log.tlog_store import TreeRecord

    old = json.dumps({"origin": "o", "vkey": "k", "stream": "CLAIMS", "stream_created": "", "created_at": 1.0}).encode()
    record = TreeRecord.decode(old)
    assert (record.predecessor, record.tiles_prefix, record.offset, record.entry_index(5)) == (None, "", 0, 4)
    from events.log_entry import Predecessor

    successor = TreeRecord("o2", "k2", "CLAIMS", "", 2.0, Predecessor("k", "note\n"), "abcd0123/")
    assert TreeRecord.decode(successor.encode()) == successor and successor.entry_index(5) == 5
