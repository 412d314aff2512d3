"""``claimlog up`` waiting for the read API: progress and the reason while it catches up, a clear line when
it gives up, and never "did not answer" for an API that answered "not ready"."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from rich.console import Console

from services.orchestration.readiness import wait_ready


@dataclass
class Running:
    stopping: bool = False


def not_ready(applied: int, head: int, *problems: str) -> httpx.Response:
    body = {"status": "not_ready", "head": head, "projections": {"claim_pages": {"last_seq": applied, "lag_events": head - applied}}}
    return httpx.Response(503, json=body | {"problems": list(problems)})


def answers(responses: Iterator[httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(lambda request: next(responses)))


def console() -> tuple[Console, io.StringIO]:
    said = io.StringIO()
    return Console(file=said, width=200), said


def test_a_registry_catching_up_is_waited_for_with_its_progress_and_the_reason():
    behind = "projection 'claim_pages' is {} events behind the log (limit 5)"
    replies = iter([
        not_ready(10, 100, behind.format(90)), not_ready(60, 100, behind.format(40)), httpx.Response(200, json={"status": "ready"}),
    ])
    out, said = console()
    assert wait_ready("http://api", Running(), out, client=answers(replies), say_every=0, poll=0.01)
    text = said.getvalue()
    assert "waiting for the read API: catching up: 10 of 100 applied (90 behind)" in text
    assert "catching up: 60 of 100 applied (40 behind, " in text and " events/s)" in text
    assert "did not answer" not in text


def test_a_registry_that_answers_but_makes_no_progress_is_given_up_with_the_reason():
    stuck = not_ready(10, 100, "reading the head of the log failed (TimeoutError)")
    out, said = console()
    client = answers(iter([stuck] * 10_000))
    assert not wait_ready("http://api", Running(), out, client=client, stalled_after=0.2, say_every=60, poll=0.01)
    text = said.getvalue()
    assert "the read API is not ready and made no progress for 0.2s" in text
    assert "reading the head of the log failed (TimeoutError)" in text and "did not answer" not in text


def test_an_api_that_never_answers_is_given_up_saying_so():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    out, said = console()
    client = httpx.Client(transport=httpx.MockTransport(refuse))
    assert not wait_ready("http://api", Running(), out, client=client, answer_within=0.2, poll=0.01)
    assert "the read API did not answer on http://api/health/ready within 0.2s" in said.getvalue()
