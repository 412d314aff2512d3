"""A commit notice is read only when it is one a projector sends: bounded, claim ids, sequences a browser reads exactly."""

from __future__ import annotations

import json

import pytest

from services.projector.notices import MAX_CLAIMS, MAX_SEQ, Notice, decode_notice


def test_a_projectors_notice_is_read():
    assert decode_notice(b'{"claims":{"CLM-0001":4,"CLM-0002":7},"through":7}') == Notice({"CLM-0001": 4, "CLM-0002": 7}, 7)


@pytest.mark.parametrize("body", [
    {"claims": {"CLM-0001": 10**26}, "through": 10**26},
    {"claims": {"CLM-0001": MAX_SEQ + 1}, "through": MAX_SEQ + 1},
    {"claims": {"CLM-0001": True}, "through": 1},
    {"claims": {"CLM-0001": "5"}, "through": 5},
    {"claims": {"CLM-0001": 0}, "through": 1},
    {"claims": {"CLM-0001": 9}, "through": 8},
    {"claims": {"CLM-0001\n": 5}, "through": 5},
    {"claims": {"<img src=x>": 5}, "through": 5},
    {"claims": {f"CLM-{n:06d}": 1 for n in range(MAX_CLAIMS + 1)}, "through": 1},
    {"claims": [], "through": 1},
    {"through": 1},
])
def test_a_notice_no_projector_sends_is_ignored(body):
    assert decode_notice(json.dumps(body).encode()) is None
