"""Tests wait on a condition, not a guessed time: ``tests/waiting.py`` fails naming what did not happen, and no
test says a wait is still going after a sleep (which holds on a slow machine whatever the code does)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.waiting import until, until_sync

TESTS = Path(__file__).resolve().parents[1]
SLEEP = re.compile(r"^\s*(await asyncio\.sleep|time\.sleep)\(")
STILL_WAITING = re.compile(r"^\s*assert not (\w+\.done\(\)|\[.*\.done\(\)\])")  # one task, or a list of them


async def test_until_returns_the_conditions_first_true_value_and_fails_naming_what_did_not_happen():
    answers = iter([0, None, "there"])
    assert await until(lambda: next(answers), timeout=5, every=0.001) == "there"
    started = time.monotonic()
    with pytest.raises(AssertionError, match="the sky falling did not happen within 0.05 s"):
        await until(lambda: False, timeout=0.05, what="the sky falling", every=0.001)
    assert time.monotonic() - started < 5
    with pytest.raises(AssertionError, match="a reply did not happen"):
        until_sync(lambda: False, timeout=0.01, what="a reply", every=0.001)


def test_no_test_asserts_a_task_still_waits_right_after_a_sleep():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        lines = path.read_text().splitlines()
        for number, (line, following) in enumerate(zip(lines, lines[1:], strict=False), start=1):
            if SLEEP.match(line) and STILL_WAITING.match(following):
                found.append(f"{path.relative_to(TESTS.parent)}:{number}")
    assert found == [], "wait until the waiter is seen waiting (tests/waiting.py), then assert it has not answered"


def test_the_check_recognises_the_pattern():
    assert SLEEP.match("        await asyncio.sleep(0.5)") and SLEEP.match("    time.sleep(0.5)")
    assert STILL_WAITING.match("        assert not reading.done(), reading.result().text")
    assert STILL_WAITING.match("        assert not [path for path, task in waiting.items() if task.done()], waiting")
    assert not STILL_WAITING.match('            assert not any(p.done() for p in producers), "they run until stopped"')
