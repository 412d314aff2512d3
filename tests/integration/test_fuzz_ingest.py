"""Hypothesis against the page importer and the JSON Lines ingester, on one real nats-server per test.

Malformed input (mutations of valid pages and lines) gets an error naming the file and line and why,
never a crash, and publishes nothing: the stream's head is checked before and after each example.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Actor
from events.registry import decode
from services.ingest.bulk import BulkIngest
from services.ingest.bulk_lines import read_commands
from services.ingest.page_format import PageFormatError
from services.ingest.pages import import_page, read_page, sample_pages
from services.log import ClaimLog
from tests.integration.test_ingest_cli import claimlog

EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")
SAMPLES = [path.read_bytes() for path in sample_pages()]
_files = itertools.count()
_claims = itertools.count(random.randint(10**8, 10**9 - 1) * 1000)  # fresh claim ids, whatever Hypothesis draws


@st.composite
def mutated_pages(draw: st.DrawFn) -> bytes:
    """A sample page, broken in one way: cut short, a byte changed, bad UTF-8, a line lost, doubled,
    moved or blown up."""
    page = draw(st.sampled_from(SAMPLES))
    lines = page.split(b"\n")
    at = draw(st.integers(0, len(page) - 1))
    line = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["truncate", "flip", "bad_utf8", "drop_line", "double_line", "swap_lines", "huge_line"]))
    if kind == "truncate":
        return page[:at]
    if kind == "flip":
        return page[:at] + bytes([page[at] ^ draw(st.integers(1, 255))]) + page[at + 1 :]
    if kind == "bad_utf8":
        return page[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])) + page[at:]
    if kind == "drop_line":
        del lines[line]
    elif kind == "double_line":
        lines.insert(line, lines[line])
    elif kind == "swap_lines":
        other = draw(st.integers(0, len(lines) - 1))
        lines[line], lines[other] = lines[other], lines[line]
    else:  # a line's text (or the whole statement) far longer than any field may be
        lines[line] = lines[line][:-1] + b"x" * draw(st.sampled_from([600, 20_001, 200_000])) + lines[line][-1:]
    return b"\n".join(lines)


def _write(directory: Path, data: bytes, suffix: str) -> Path:
    path = directory / f"fuzz-{next(_files)}{suffix}"
    path.write_bytes(data)
    return path


async def _valid_events_after(claim_log: ClaimLog, after: int) -> int:
    """How many events the log holds after ``after``, each of which must decode and pass the event models."""
    stored = await claim_log.read_log(after_seq=after, limit=1000)
    for event in stored:
        decode(event.data)
    return len(stored)


@pytest.mark.slow
@FUZZ
@given(data=mutated_pages())
async def test_a_mutated_page_is_refused_naming_file_and_line_or_imports_only_valid_events(
    data: bytes, claim_log: ClaimLog, tmp_path: Path
):
    path = _write(tmp_path, data, ".txt")
    head = await claim_log.head()
    try:
        page = read_page(path)
    except PageFormatError as error:
        assert str(error).startswith(f"{path}:{error.line}: ") and error.line >= 1 and error.problem
        assert await claim_log.head() == head
        return
    outcome = await import_page(claim_log, page)
    assert outcome.error is None
    assert await _valid_events_after(claim_log, head) == outcome.published == await claim_log.head() - head


def _valid_lines() -> list[dict]:
    """A draft of a claim no other line names and a source for it: lines that are valid in any file."""
    claim_id = f"CLM-{next(_claims)}"
    return [
        {"command": "draft_claim", "claim_id": claim_id, "slug": f"claim-{claim_id.lower()}",
         "statement": "Planning before acting helps small models.", "capability": "Planning",
         "observed_on": "A small benchmark."},
        {"command": "attach_source", "claim_id": claim_id, "source_id": "s1", "relation": "supports",
         "measured": "Accuracy +4 points."},
    ]


DEEP = "[" * 5000 + "]" * 5000


@st.composite
def broken_line(draw: st.DrawFn, line: dict) -> bytes:
    """A valid line made invalid, for certain, in one of the ways files go wrong."""
    text = json.dumps(line)
    field = draw(st.sampled_from([k for k in line if k != "command"]))
    kind = draw(st.sampled_from(
        ["truncate", "bad_utf8", "missing", "wrong_type", "huge", "duplicate_key", "deep", "unknown_field", "not_object"]
    ))
    if kind == "truncate":
        return text.encode()[: draw(st.integers(1, len(text) - 1))]
    if kind == "bad_utf8":
        raw = text.encode()
        at = raw.index(b'"', raw.index(f'"{field}": '.encode()) + len(field) + 3) + 1
        return raw[:at] + b"\xff\xfe" + raw[at:]
    if kind == "missing":
        return json.dumps({k: v for k, v in line.items() if k != "claim_id"}).encode()
    if kind == "wrong_type":
        return json.dumps({**line, field: draw(st.sampled_from([5, 1.5, [], {}, None, True]))}).encode()
    if kind == "huge":
        return json.dumps({**line, field: "x" * draw(st.sampled_from([20_001, 1_100_000]))}).encode()
    if kind == "duplicate_key":  # JSON allows it; the last one counts, and this one is no claim id
        return (text[:-1] + ', "claim_id": "CLM-1"}').encode()
    if kind == "deep":
        return text.replace(json.dumps(line[field]), DEEP, 1).encode()
    if kind == "unknown_field":
        return json.dumps({**line, "actor": {"id": "someone-else", "kind": "person"}}).encode()
    return draw(st.sampled_from([b"[]", b"42", b'"draft_claim"', b"null", b"{}"]))


@st.composite
def jsonl_files(draw: st.DrawFn) -> tuple[list[bytes], list[bool | None]]:
    """Lines, each valid (True), broken for certain (False) or with a byte flipped (None: either)."""
    lines, validity = [], []
    for _ in range(draw(st.integers(1, 4))):
        for line in _valid_lines():
            kind = draw(st.sampled_from(["valid", "broken", "flipped"]))
            if kind == "valid":
                lines.append(json.dumps(line).encode())
            elif kind == "broken":
                lines.append(draw(broken_line(line)))
            else:
                raw = json.dumps(line).encode()
                at = draw(st.integers(0, len(raw) - 1))
                flipped = raw[at] ^ draw(st.integers(1, 255))
                lines.append(raw[:at] + bytes([flipped if flipped not in b"\n\r" else 0x20]) + raw[at + 1 :])
            validity.append({"valid": True, "broken": False, "flipped": None}[kind])
    return lines, validity


@pytest.mark.slow
@FUZZ
@given(file=jsonl_files())
async def test_bad_json_lines_are_rejected_one_by_one_naming_the_line_and_valid_lines_go_through(
    file: tuple[list[bytes], list[bool | None]], claim_log: ClaimLog, tmp_path: Path
):
    lines, validity = file
    path = _write(tmp_path, b"\n".join(lines) + b"\n", ".jsonl")
    head = await claim_log.head()
    parsed, errors = read_commands(path, BOT)
    for error in errors:
        assert error.message.startswith(f"{path}:{error.number}: ") and error.reason
    report = await BulkIngest(claim_log, BOT, window=8).run(parsed)
    rejected = {e.number: e for e in [*errors, *report.rejected]}
    for number, valid in enumerate(validity, start=1):
        if valid is False:
            assert number in rejected, (number, lines[number - 1][:200])
        elif valid is True and (number % 2 == 1 or validity[number - 2] is True):  # a source needs its draft
            assert number not in rejected, rejected[number]
    assert report.accepted + report.present + len(rejected) == len(lines)
    published = await claim_log.head() - head
    assert published == report.accepted == await _valid_events_after(claim_log, head)
    if all(valid is False for valid in validity):
        assert published == 0


async def test_a_page_with_a_field_too_long_for_any_event_is_refused_naming_the_line(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path
):
    """Found by the page fuzz: such a page parsed, then crashed ``claimlog ingest`` with a traceback."""
    lines = sample_pages()[0].read_text().split("\n")
    lines[1] = "Capability: " + "x" * 501
    lines[0] = lines[0][:-1] + "y" * 20_001 + "."
    broken = tmp_path / "too-long.txt"
    broken.write_text("\n".join(lines))
    result = claimlog("ingest", str(broken), nats_url=nats_url, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{broken}:1: statement: String should have at most 20000 characters" in result.stderr
    assert await claim_log.head() == 0
