"""Waiting in tests on a condition, never for a guessed time: a deadline that fails naming what did not
happen, and the reads of the read API demonstrably parked on the projections (not merely not yet answered)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event

EVERY = 0.01


async def until(condition: Callable[[], Any], *, timeout: float = 10.0, what: str = "the condition", every: float = EVERY) -> Any:
    """``condition()``'s first true value, asked every ``every`` seconds; fails after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        await asyncio.sleep(every)
    return value


def until_sync(condition: Callable[[], Any], *, timeout: float = 10.0, what: str = "the condition", every: float = EVERY) -> Any:
    """``until`` for code without an event loop (a subprocess, a browser)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(every)
    return value


class CheckpointPolls:
    """Who has read the projections' checkpoints on an engine, and how often: a read with ``?after=`` that
    waits polls them again and again from its own task, and nothing else in an API without a projector does."""

    def __init__(self) -> None:
        self.by_reader: Counter[object] = Counter()

    def seen(self, _conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "projection_checkpoints" in statement:
            try:
                reader: object = asyncio.current_task()
            except RuntimeError:  # a worker thread: no task
                reader = threading.get_ident()
            self.by_reader[reader] += 1

    def parked(self, polls: int = 3) -> int:
        """How many readers have polled the checkpoints at least ``polls`` times: past their first look, in the waiting loop."""
        return sum(count >= polls for count in self.by_reader.values())

    async def until_parked(self, readers: int, *, polls: int = 3, timeout: float = 10.0) -> None:
        """Return once ``readers`` reads are each waiting for the projections."""
        await until(lambda: self.parked(polls) >= readers, timeout=timeout, what=f"{readers} reads parked on the checkpoints")


@contextmanager
def checkpoint_polls(engine: Engine) -> Iterator[CheckpointPolls]:
    """Count the checkpoint reads on ``engine`` while the block runs."""
    polls = CheckpointPolls()
    event.listen(engine, "before_cursor_execute", polls.seen)
    try:
        yield polls
    finally:
        event.remove(engine, "before_cursor_execute", polls.seen)
