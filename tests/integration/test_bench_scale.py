"""bench/scale.py runs end to end at a tiny size: a partitioned log folded into PostgreSQL by 1 and 2
`claimlog projector` worker processes taking partitions by lease, each receiving only its share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.databases import POSTGRES_URL

ROOT = Path(__file__).resolve().parents[2]


def test_the_scale_bench_runs_small_and_each_worker_receives_at_most_its_share(tmp_path: Path):
    scratch = tmp_path / "tmp"  # where the bench's temporary files go: it leaves nothing there
    scratch.mkdir()
    env = {**os.environ, "COLUMNS": "300", "TMPDIR": str(scratch)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--small", "--no-record", "--workers", "1", "2", "--postgres", POSTGRES_URL],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert list(scratch.iterdir()) == []
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]] for line in done.stdout.splitlines() if line.startswith("│")}
    assert set(rows) == {"1", "2"}, done.stdout
    assert rows["1"][1].startswith("100.0%"), rows["1"]  # one worker receives the whole log
    events, bytes_ = float(rows["2"][1].split("%")[0]), float(rows["2"][3].rstrip("%"))
    assert 45.0 <= events <= 55.0, rows["2"]  # two receive about half each: at most 1/n + 5%, never the whole log
    assert 45.0 <= bytes_ <= 55.0, rows["2"]
