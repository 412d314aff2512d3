"""The ingest progress bar: counts every line, redraws at most every tenth of a second, ends complete."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress, TextColumn

from services.ingest.cli import throttled_advance


def _progress() -> Progress:
    return Progress(TextColumn("{task.completed}/{task.total} {task.fields[rate]}"), console=Console(file=io.StringIO()))


def test_every_line_is_counted_and_the_task_ends_complete():
    progress = _progress()
    task = progress.add_task("commands", total=1000, rate="")
    advance = throttled_advance(progress, task, "commands", every=3600)  # no redraw by time during the test
    for _ in range(999):
        advance(1)
    assert progress.tasks[0].completed == 0  # held back: redrawing per line cost more than the work
    advance(1)
    assert progress.tasks[0].completed == 1000 and progress.tasks[0].finished


def test_lines_counted_in_chunks_and_by_time_reach_the_bar():
    progress = _progress()
    task = progress.add_task("commands", total=50, rate="")
    advance = throttled_advance(progress, task, "commands", every=0)  # every call redraws
    advance(10)
    assert progress.tasks[0].completed == 10
    advance(40)
    assert progress.tasks[0].completed == 50


def test_the_right_task_advances_when_the_bar_has_several():
    progress = _progress()
    other = progress.add_task("other", total=10, rate="")
    task = progress.add_task("commands", total=5, rate="")
    advance = throttled_advance(progress, task, "commands", every=3600)
    for _ in range(5):
        advance(1)
    assert [t.completed for t in progress.tasks] == [0, 5]
    assert progress.tasks[0].id == other
