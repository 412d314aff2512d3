"""Waiting at start for the read API to be ready: while it catches up, how far (applied of head, rate) and
why it is not ready yet; given up only when it never answers or stops making progress."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import httpx
from rich.console import Console
from rich.markup import escape

ANSWER_WITHIN = 60.0  # seconds the API may take to answer at all
STALLED_AFTER = 300.0  # seconds without progress after which a registry that answers "not ready" is given up on
SAY_EVERY = 5.0  # seconds between two progress lines


class Stoppable(Protocol):
    stopping: bool


@dataclass
class Sample:
    """What one readiness answer said: the lowest position and the head (None: unknown), and why not ready."""

    ready: bool
    applied: int | None = None
    head: int | None = None
    problems: tuple[str, ...] = ()


def ask(client: httpx.Client, base: str) -> Sample | None:
    """``GET /health/ready`` read into a ``Sample``; None when the API does not answer (yet)."""
    try:
        # Readiness, not the full report: /health also asks the leases and every node, more than a poll should wait on.
        response = client.get(f"{base}/health/ready", timeout=5)
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
    except (httpx.HTTPError, ValueError):
        return None
    seqs = [p.get("last_seq") for p in body.get("projections", {}).values()]
    applied = None if not seqs or None in seqs else min(seqs)
    return Sample(response.status_code == 200, applied, body.get("head"), tuple(body.get("problems", ())))


def describe(sample: Sample, rate: float | None) -> str:
    """One line: how far the read models have got and why the API is not ready."""
    why = [p for p in sample.problems if "events behind the log" not in p]
    if sample.applied is not None and sample.head is not None and sample.applied < sample.head:
        per_second = f", {rate:,.0f} events/s" if rate else ""
        line = f"catching up: {sample.applied:,} of {sample.head:,} applied ({sample.head - sample.applied:,} behind{per_second})"
        return "; ".join([line, *why])
    return "not ready: " + ("; ".join(why) or "; ".join(sample.problems) or "no reason given")


def wait_ready(  # noqa: PLR0913 - the clock and limits are passed in so that a test can run it quickly
    base: str, supervisor: Stoppable, console: Console, *, client: httpx.Client | None = None,
    answer_within: float = ANSWER_WITHIN, stalled_after: float = STALLED_AFTER, say_every: float = SAY_EVERY, poll: float = 0.2,
) -> bool:
    """Wait until ``base`` answers ready (True), saying how far the read models have got; False, with the
    reason printed, when it never answered within ``answer_within`` or made no progress for ``stalled_after``."""
    if client is None:
        with httpx.Client() as own:
            return wait_ready(base, supervisor, console, client=own, answer_within=answer_within, stalled_after=stalled_after, say_every=say_every, poll=poll)
    started = progressed = said = time.monotonic()
    best: int | None = None
    last: Sample | None = None
    rate_from: tuple[float, int] | None = None
    while not supervisor.stopping:
        now, sample = time.monotonic(), ask(client, base)
        if sample is not None and sample.ready:
            return True
        if sample is None and last is None and now - started > answer_within:
            console.print(f"[red]the read API did not answer on {base}/health/ready within {answer_within:g}s[/red]: see its log lines above")
            return False
        if last is not None and now - progressed > stalled_after:
            console.print(f"[red]the read API is not ready and made no progress for {stalled_after:g}s[/red]: {escape(describe(last, None))}")
            return False
        if sample is not None:
            if sample.applied is not None and (best is None or sample.applied > best):
                best, progressed = sample.applied, now
                rate_from = rate_from or (now, sample.applied)
            if last is None or now - said >= say_every:
                rate = (best - rate_from[1]) / (now - rate_from[0]) if rate_from and best is not None and now > rate_from[0] else None
                console.print(f"waiting for the read API: {escape(describe(sample, rate))}")
                said = now
            last = sample
        time.sleep(poll)
    return False
