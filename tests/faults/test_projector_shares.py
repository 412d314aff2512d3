"""``claimlog projector`` as several processes (CLAIMLOG_PROJECTOR_SHARES): killed, stopped, and
started again with another number of shares, over a log of 100,000 events.

The share processes must stop on their own when their parent is killed (none may go on writing
unsupervised), and each start with another number of shares must take over exactly where the last
left off: at the end the tables equal a clean replay of the whole log.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sqlalchemy import select

from projections.tables import checkpoints
from tests.faults.conftest import PublishedLog, sqlite_url
from tests.faults.harness import (
    CleanReplay,
    checksums,
    migrated,
    sigkill,
    start_projector,
    stop,
    wait_for_checkpoint,
)


def share_processes(pid: int) -> list[int]:
    """The share processes a projector process started (its spawned children, not multiprocessing's helper)."""
    children = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        children += [int(child) for child in listing.read_text().split()]
    return [child for child in children if "spawn_main" in _command_line(child)]


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited: its parent (init, once the projector died) reaps it


async def wait_gone(pids: list[int], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"share processes {[p for p in pids if alive(p)]} still run {timeout}s after their parent's end"
        await asyncio.sleep(0.05)


def rows(engine) -> list[tuple[str, int, int, int]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(select(checkpoints.c.name, checkpoints.c.share, checkpoints.c.shares, checkpoints.c.last_seq))]


async def test_shares_stop_with_their_parent_and_another_number_of_shares_takes_over(
    replay_log: PublishedLog, tmp_path: Path, fault_report
):
    url = sqlite_url(tmp_path, "shares.sqlite3")
    engine = migrated(url)
    head = replay_log.head
    logfile = tmp_path / "projector.log"
    try:
        # Two shares, their parent killed a quarter of the way: the shares stop on their own.
        projector = start_projector(replay_log.url, url, name="sharing", shares=2, log_to=logfile)
        await wait_for_checkpoint(engine, beyond=head // 4, timeout=120, process=projector)
        shares = share_processes(projector.pid)
        assert len(shares) == 2, f"expected two share processes under the projector, found {shares}"
        sigkill(projector)
        await wait_gone(shares, timeout=30)
        left = rows(engine)
        fault_report(f"two shares, their parent SIGKILLed: checkpoints left {sorted(left)}; both shares stopped on their own")

        # One process takes over (bringing the shares to one position first), and is stopped with SIGTERM.
        projector = start_projector(replay_log.url, url, name="sharing", shares=1, log_to=logfile)
        await wait_for_checkpoint(engine, beyond=max(seq for *_, seq in left) + head // 10, timeout=120, process=projector)
        stop(projector)
        assert projector.returncode == 0, logfile.read_text()[-3000:]
        assert {(share, of) for _, share, of, _ in rows(engine)} == {(0, 1)}

        # Two shares again, to the head of the log; SIGTERM stops them and their parent cleanly.
        projector = start_projector(replay_log.url, url, name="sharing", shares=2, log_to=logfile)
        await wait_for_checkpoint(engine, beyond=head - 1, timeout=150, process=projector)
        shares = share_processes(projector.pid)
        stop(projector)
        assert projector.returncode == 0, logfile.read_text()[-3000:]
        await wait_gone(shares, timeout=5)
        assert {(share, of, seq) for _, share, of, seq in rows(engine)} == {(0, 2, head), (1, 2, head)}
    finally:
        stop(projector)
    # A clean replay of its own: the shared one (replay_log.clean) moves only forward, and the next test's
    # kills need it where it stands.
    clean_engine = migrated(sqlite_url(tmp_path, "clean.sqlite3"))
    clean = CleanReplay(replay_log.clean.claim_log, clean_engine, name="shares-clean-replay")
    assert checksums(engine) == await clean.to(head), "the tables differ from a clean replay of the log"
    fault_report("then one process, stopped with SIGTERM, then two shares to the head: the tables equal a clean replay")
    engine.dispose()
    clean_engine.dispose()
