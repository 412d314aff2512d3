"""Parsing what JetStream sends: ack subjects and timestamps, identical on every read path."""

from __future__ import annotations

import pytest

from services.log import LogError
from services.log.consumer import _position
from services.log.reader import parse_store_time, store_time_from_ns


def test_store_times_agree_whether_read_as_text_or_as_nanoseconds():
    nanoseconds = 1_796_230_567_939_147_999
    text = "2026-12-02T16:56:07.939147999Z"
    assert store_time_from_ns(nanoseconds) == parse_store_time(text)
    assert parse_store_time(text).microsecond == 939147


def test_both_ack_subject_formats_give_the_stream_sequence_and_time():
    v1 = "$JS.ACK.CLAIMS.projector.1.42.40.1796230567939147999.7"
    v2 = "$JS.ACK._.ACCOUNTHASH.CLAIMS.projector.1.42.40.1796230567939147999.7.token"
    assert _position(v1) == _position(v2) == (42, store_time_from_ns(1_796_230_567_939_147_999))


def test_a_reply_that_is_not_an_ack_subject_is_refused():
    with pytest.raises(LogError, match="not a JetStream delivery"):
        _position("_INBOX.abc")
