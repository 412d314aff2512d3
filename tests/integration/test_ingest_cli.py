"""``claimlog ingest`` of registry pages against a real nats-server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services.ingest.pages import sample_pages
from services.log import ClaimLog


def claimlog(*args: str, nats_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CLAIMLOG_NATS_URL": nats_url, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


async def test_ingesting_the_same_pages_twice_publishes_nothing_new(nats_url: str, claim_log: ClaimLog, tmp_path: Path):
    first = claimlog("ingest", "--sample", nats_url=nats_url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "3 pages published (21 events), 0 already in the log, 0 refused" in first.stderr
    head = await claim_log.head()
    second = claimlog("ingest", *map(str, sample_pages()), nats_url=nats_url, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "0 pages published (0 events), 3 already in the log, 0 refused" in second.stderr
    assert await claim_log.head() == head == 21


async def test_a_page_that_does_not_parse_names_file_and_line_and_publishes_nothing(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path
):
    good = sample_pages()[0]
    broken = tmp_path / "broken.txt"
    lines = good.read_text().split("\n")
    lines[1] = lines[1].replace("Capability:", "Capabilty:")
    broken.write_text("\n".join(lines))
    result = claimlog("ingest", str(broken), nats_url=nats_url, cwd=tmp_path)
    assert result.returncode == 1
    assert f"{broken}:2:" in result.stderr
    assert "Capability" in result.stderr
    assert await claim_log.head() == 0


async def test_a_bad_page_does_not_stop_the_good_ones(nats_url: str, claim_log: ClaimLog, tmp_path: Path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = claimlog("ingest", str(empty), str(sample_pages()[1]), nats_url=nats_url, cwd=tmp_path)
    assert result.returncode == 1
    assert "1 pages published (7 events), 0 already in the log, 1 refused" in result.stderr
    assert f"{empty}:1:" in result.stderr


async def test_a_run_whose_every_page_is_refused_shows_no_empty_bar_and_says_what_to_do(
    nats_url: str, claim_log: ClaimLog, tmp_path: Path
):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    result = claimlog("ingest", str(empty), nats_url=nats_url, cwd=tmp_path)
    assert result.returncode == 1
    said = " ".join(result.stderr.split())
    assert "0/0" not in said and "-:--:--" not in said
    assert f"{empty}:1:" in said
    assert "0 pages published (0 events), 0 already in the log, 1 refused; nothing of a refused page was published: " \
           "correct it at the line named and ingest it again" in said
    assert await claim_log.head() == 0
