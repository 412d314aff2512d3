"""Helpers of the restore tests: a log longer than a few restore batches with each claim in all of them,
what a restored log must keep of each event, and the command a failed import or restore says resumes it."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from services.log import ClaimLog, NatsTls, StoredEvent, connect
from services.log.batches import MAX_BATCH_EVENTS
from tests.builders import attached, drafted
from tests.conftest import random_claim_id


async def write_interleaved(claim_log: ClaimLog, *, claims: int = 200, rounds: int = 12) -> int:
    """``claims`` claims appended one event each in turn for ``rounds`` rounds; returns the head."""
    ids = [random_claim_id() for _ in range(claims)]
    heads: dict[str, tuple[int, str | None]] = {claim: (0, None) for claim in ids}
    for turn in range(rounds):
        done = await asyncio.gather(*(
            claim_log.append(claim, [drafted(claim) if turn == 0 else attached(claim, f"s{turn}")],
                             expected_seq=heads[claim][0], prev_hash=heads[claim][1])
            for claim in ids
        ))
        heads = {claim: (appended.last_seq, appended.last_hash) for claim, appended in zip(ids, done, strict=True)}
    return await claim_log.head()


def exact(stored: list[StoredEvent]) -> list[tuple]:
    """Each event as a restore must keep it: sequence, subject, bytes, message id, store time, signature."""
    return [(s.seq, s.subject, s.data, s.msg_id, s.stored_at, s.signature) for s in stored]


def resume_command(output: str) -> list[str]:
    """The arguments of the ``claimlog`` command a failed import or restore printed to resume it."""
    found = re.search(r"resume with: (claimlog .+)$", output, re.MULTILINE)
    assert found, output
    return shlex.split(found.group(1))[1:]


async def killed_at_its_first_event(args: list[str], *, env: dict[str, str], cwd: Path, tls: NatsTls | None = None,
                                    deadline: float, stream: str = "CLAIMS") -> None:
    """Run ``claimlog`` with ``args`` and stop it dead as soon as it publishes the first event of its second
    batch (SIGSTOP from the subscription's callback, with no wait between), let the commits it had sent
    land, then SIGKILL it: the first batch is stored, a few at most are, far from the end of a long log.
    (Stopped at its first publish, a batch's events go out before its commit, and on a cluster nothing
    was stored; stopped after a wait, a fast restore had already finished.)"""
    nc = await connect(env["CLAIMLOG_NATS_URL"], tls=tls)
    stopped = asyncio.Event()
    count, running = 0, None

    async def seen(_msg: object) -> None:
        nonlocal count
        count += 1
        if count == MAX_BATCH_EVENTS + 1 and running is not None:
            running.send_signal(signal.SIGSTOP)
            stopped.set()

    try:
        await nc.subscribe("claims.>", cb=seen)
        await nc.flush()
        running = subprocess.Popen([sys.executable, "-m", "services.cli", *args], env={**os.environ, **env}, cwd=cwd,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await asyncio.wait_for(stopped.wait(), deadline)
            await asyncio.wait_for(_settled(nc, stream), deadline)
        finally:
            running.kill()
            running.wait(timeout=deadline)
    finally:
        await nc.close()


async def _settled(nc, stream: str) -> None:
    """Once the stream holds events and has stopped growing for a moment: the commits sent before the stop landed."""
    js, last, still = nc.jetstream(), -1, 0
    while still < 20:
        messages = (await js.stream_info(stream)).state.messages
        still = still + 1 if messages == last and messages else 0
        last = messages
        await asyncio.sleep(0.01)
