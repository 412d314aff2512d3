"""Identical lines of one claim, against a real nats-server: each copy is an event of its own, whatever
the claim cache held when it came (a claim evicted between two copies included), and a rerun finds
every one of them. Logs are compared event for event, so the checks hold however ids are derived."""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import Actor
from events.subjects import LogLayout
from services.ingest.bulk import BulkIngest
from services.ingest.bulk_claims import DEFAULT_CAPACITY
from services.ingest.bulk_lines import BulkReport, iter_commands
from services.log import ClaimLog, StreamSpec

BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")
DECIDED_AT = datetime(2026, 12, 7, 4, 0, tzinfo=UTC)  # one clock for every run: equal files give equal bytes
_logs = itertools.count(random.randint(0, 10**6))


def draft(claim_id: str) -> dict:
    return {"command": "draft_claim", "claim_id": claim_id, "slug": claim_id.lower(), "statement": "S.", "capability": "C", "observed_on": "O."}


def file_disagreement(claim_id: str, disagreement_id: str) -> dict:
    return {"command": "file_disagreement", "claim_id": claim_id, "disagreement_id": disagreement_id, "argument": "A."}


def answer(claim_id: str, disagreement_id: str, text: str = "Because.") -> dict:
    return {"command": "answer_disagreement", "claim_id": claim_id, "disagreement_id": disagreement_id, "answer": text}


async def fresh_log(claim_log: ClaimLog) -> ClaimLog:
    """A log of its own on the test's server (a stream and subjects no other run of the test uses)."""
    name = f"copies{next(_logs)}"
    log = ClaimLog(claim_log.nc, StreamSpec(name.upper(), layout=LogLayout(name, 0)))
    await log.ensure()
    return log


async def ingest(log: ClaimLog, path: Path, *, capacity: int, batch: int = 8) -> BulkReport:
    """The file ingested in small batches (a claim leaves the cache only once its events are acknowledged)."""
    return await BulkIngest(log, BOT, capacity=capacity, batch=batch, read_ahead=16, clock=lambda: DECIDED_AT).run(iter_commands(path))


async def stored(log: ClaimLog) -> list[bytes]:
    """Every event of the log, as the bytes it keeps, in order."""
    return [event.data for event in await log.read_log(after_seq=0, limit=10_000)]


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def test_a_repeated_line_after_its_claim_was_evicted_is_published_as_the_api_would(claim_log: ClaimLog, tmp_path: Path):
    others = [draft(f"CLM-{9000 + n}") for n in range(40)]
    lines = [draft("CLM-0001"), file_disagreement("CLM-0001", "d1"), answer("CLM-0001", "d1"), *others, answer("CLM-0001", "d1")]
    path = write_lines(tmp_path / "commands.jsonl", lines)
    small, large = await fresh_log(claim_log), await fresh_log(claim_log)
    for log, capacity in ((small, 2), (large, DEFAULT_CAPACITY)):
        report = await ingest(log, path, capacity=capacity)
        assert (report.accepted, report.present, report.rejected) == (44, 0, []), capacity
    assert await stored(small) == await stored(large)
    again = await ingest(small, path, capacity=2)
    assert (again.accepted, again.present, again.rejected) == (0, 44, [])
    assert await small.head() == 44


CLAIMS = ["CLM-0001", "CLM-0002", "CLM-0003"]
LINES = st.one_of(
    st.builds(draft, st.sampled_from(CLAIMS)),
    st.builds(file_disagreement, st.sampled_from(CLAIMS), st.sampled_from(["d1", "d2"])),
    st.builds(answer, st.sampled_from(CLAIMS), st.sampled_from(["d1", "d2"]), st.sampled_from(["Yes.", "No."])),
)


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(lines=st.lists(LINES, min_size=1, max_size=24), capacity=st.integers(1, 3))
async def test_a_file_gives_the_same_log_and_report_whatever_the_claim_cache_holds(
    lines: list[dict], capacity: int, claim_log: ClaimLog, tmp_path: Path
):
    path = write_lines(tmp_path / f"commands-{next(_logs)}.jsonl", lines)
    small, large = await fresh_log(claim_log), await fresh_log(claim_log)
    tiny = await ingest(small, path, capacity=capacity)
    ample = await ingest(large, path, capacity=DEFAULT_CAPACITY)
    outcomes = lambda r: (r.accepted, r.present, [(e.number, e.reason) for e in r.rejected])  # noqa: E731
    assert outcomes(tiny) == outcomes(ample)
    assert await stored(small) == await stored(large)
    again, again_ample = await ingest(small, path, capacity=capacity), await ingest(large, path, capacity=DEFAULT_CAPACITY)
    assert outcomes(again) == outcomes(again_ample)
    assert again.present >= tiny.accepted + tiny.present  # a rerun finds every line that went in, whatever the cache holds
    assert await stored(small) == await stored(large)
