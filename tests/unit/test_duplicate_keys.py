"""A command names a key twice exactly when ``json.loads``, with a hook that sees every key, reads one twice.

``refuse_duplicate_keys`` reads UTF-8 text with a decoder made once and leaves whatever that decoder
cannot read to ``json.loads``, which also reads a byte order mark, UTF-16 and UTF-32.
"""

from __future__ import annotations

import json

import pytest

from services.commands.models import DuplicateKeyError, refuse_duplicate_keys


def names_a_key_twice(data: bytes | str) -> bool:
    """The definition: some object, as ``json.loads`` reads the text, names a key twice."""

    def hook(pairs):
        if len({key for key, _ in pairs}) != len(pairs):
            raise LookupError
        return dict(pairs)

    try:
        json.loads(data, object_pairs_hook=hook)
    except LookupError:
        return True
    except (ValueError, RecursionError):
        return False
    return False


TWICE = '{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "a", "reason": "b"}'
ONCE = '{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "a"}'
CASES = [
    ONCE.encode(),
    TWICE.encode(),
    TWICE,
    b"\xef\xbb\xbf" + TWICE.encode(),  # a byte order mark: json.loads reads UTF-8 past it
    b"\xef\xbb\xbf" + ONCE.encode(),
    TWICE.encode("utf-16"),  # UTF-16, with its byte order mark
    TWICE.encode("utf-16-le"),  # UTF-16 without one: json.loads tells it by the zero bytes
    TWICE.encode("utf-32"),
    ONCE.encode("utf-16-le"),
    b'{"a": 1, "\\u0061": 2}',  # the same key, once escaped
    b'{"a": {"k": 1}, "b": {"k": 2}}',  # the same key in two objects
    b'{"a": [{"k": 1, "k": 2}]}',
    b'{"a": "\xed\xa0\x80", "a": 1}',  # an encoded surrogate: not UTF-8, json.loads reads it
    b'{"a": "\xff", "a": 1}',  # not UTF-8 at all
    b'{"a": 1, "a": 2',  # not JSON
    b'{"a": 1}{"a": 2}',
    b'[' * 100_000 + b'{"a": 1, "a": 2}' + b']' * 100_000,  # nested past what Python parses
    '\ufeff' + TWICE,  # text that starts with a byte order mark: json.loads refuses it
]


@pytest.mark.parametrize("data", CASES, ids=range(len(CASES)))
def test_the_check_refuses_what_json_loads_reads_as_naming_a_key_twice(data):
    expected = names_a_key_twice(data)
    try:
        refuse_duplicate_keys(data)
    except DuplicateKeyError:
        refused = True
    else:
        refused = False
    assert refused == expected


def test_a_key_named_twice_is_named_with_where_its_object_is():
    with pytest.raises(DuplicateKeyError, match=r"the JSON object at \$\.a\[0\] names 'k' more than once"):
        refuse_duplicate_keys(b'{"a": [{"k": 1, "k": 2}]}')
    with pytest.raises(DuplicateKeyError, match=r"at \$ names 'reason' more than once"):
        refuse_duplicate_keys(b"\xef\xbb\xbf" + TWICE.encode())


BASES = [
    {"command": "retract_claim", "claim_id": "CLM-0001", "reason": "reason"},  # a value that reads as a key
    {"command": "attach_source", "claim_id": "CLM-0001", "source_id": "s1", "relation": "supports", "measured": "m [1]", "truncated": False},
    {"command": "record_review", "claim_id": "CLM-0001", "review_id": "r1", "verdict": "sound", "confidence": "low", "revision": 1, "summary": None},
    {"command": "draft_claim", "claim_id": "CLM-0001", "slug": "a-b", "statement": "S {x}", "capability": "C", "observed_on": "O"},
    {"command": "revise_claim", "claim_id": "CLM-0001", "statement": "caf\u00e9", "event_id": "0190a000-0000-7000-8000-00000000c0de"},
]


def lines_of(body: dict) -> list[bytes]:
    """The command as written, and each way of naming one of its keys again."""
    plain = json.dumps(body)
    out = [plain, json.dumps(body, ensure_ascii=False), json.dumps(body, separators=(",", ":"))]
    for key in body:
        value = json.dumps("other" if key != "revision" else 2)
        out.append(plain[:-1] + f', "{key}": {value}}}')  # the same key again, last
        out.append("{" + f'"{key}" : {value}, ' + plain[1:])  # again, first, spaced before its colon
        escaped = "".join(f"\\u{ord(c):04x}" if i == 0 else c for i, c in enumerate(key))
        out.append(plain[:-1] + f', "{escaped}": {value}}}')  # again, escaped
        compact = json.dumps(body, separators=(",", ":"))
        out.append(compact[:-1] + f',"{key}":{value}}}')  # again, nothing between the tokens
        out.append(compact[:-1] + f',"{key}"\t\n:{value}}}')  # again, a tab and a line break before its colon
        out.append(compact[:-1] + f',"{key}":":{key}"}}')  # again, its value starting with a colon
    out.append(plain[:-1] + ', "x": {"k": 1, "k": 2}}')  # twice in a nested object (and an unknown field)
    out.append(plain[:-1] + ', "x": [{"k": 1}, {"k": 2}]}')  # once in each of two objects
    return [line.encode() for line in out]


@pytest.mark.parametrize("body", BASES, ids=[b["command"] for b in BASES])
def test_a_command_is_refused_for_a_key_named_twice_exactly_when_json_loads_reads_one(body):
    from pydantic import ValidationError

    from services.commands.models import COMMAND_ADAPTER, parse_command

    for line in lines_of(body):
        try:
            command = parse_command(line)
        except DuplicateKeyError:
            assert names_a_key_twice(line), line
            continue
        except ValidationError:
            assert not names_a_key_twice(line), line
            continue
        assert not names_a_key_twice(line), line
        assert command == COMMAND_ADAPTER.validate_json(line)
