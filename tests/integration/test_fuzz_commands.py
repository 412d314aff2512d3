"""Schemathesis against the API's own OpenAPI document, on a real nats-server and a running projector.

Every command route is fuzzed with a valid bearer token and without one, and the read routes briefly:
no answer is a 5xx or outside the schema, and afterwards every event in the log decodes, passes the
event models and keeps its claim's hash chain. Hypothesis draws in a worker thread; each request
goes to the app in the test's event loop, where the log connection lives.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi import checks as openapi_checks

from events.registry import decode
from services.audit.verify import Report, check_log
from tests.integration.command_api import Api, draft, running_api

COMMAND_EXAMPLES = 30  # per route and mode (valid and invalid inputs), with a valid token
ANONYMOUS_EXAMPLES = 15  # the same without one
READ_EXAMPLES = 25
CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]
SEEDED = ("CLM-0000", "CLM-0001", "CLM-00000")
BODY_UNPARSABLE = "There was an error parsing the body"
READ_ROUTES = ("/claims", "/claims/{claim_key}", "/scorecard", "/scorecard/{capability}", "/events")


@pytest.fixture
async def api(claim_log, engine) -> AsyncIterator[Api]:
    """The command API, answering a read-your-writes wait for a sequence never written within a fraction of a second."""
    async for running in running_api(claim_log, engine, read_wait=0.2):
        yield running


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


def _sender(api: Api, loop: asyncio.AbstractEventLoop) -> Callable[[dict], httpx.Response]:
    """Send a request given as requests' keyword arguments to the app, in the test's event loop."""

    def send(kwargs: dict) -> httpx.Response:
        body = kwargs.get("data")
        # As bytes: a generated bearer token may hold any character, and httpx encodes a str header as ASCII.
        kwargs["headers"] = {name: value.encode() if isinstance(value, str) else value for name, value in kwargs["headers"].items()}
        if "json" in kwargs:
            request = api.http.request(
                kwargs["method"], kwargs["url"], headers=kwargs["headers"], params=kwargs.get("params"), json=kwargs["json"]
            )
        else:
            content = body.encode() if isinstance(body, str) else body
            request = api.http.request(
                kwargs["method"], kwargs["url"], headers=kwargs["headers"], params=kwargs.get("params"), content=content
            )
        return asyncio.run_coroutine_threadsafe(request, loop).result(timeout=60)

    return send


def fuzz(api: Api, loop: asyncio.AbstractEventLoop, paths: Callable[[str, str], bool], *, headers: dict[str, str],
         examples: int, accept: Callable[[httpx.Response], None] = lambda r: None) -> tuple[int, list[str]]:
    """Fuzz each operation ``paths`` selects, valid and invalid inputs; returns requests sent and failures."""
    schema = schemathesis.openapi.from_dict(asyncio.run_coroutine_threadsafe(api.http.get("/openapi.json"), loop).result().json())
    send, sent, failures = _sender(api, loop), [0], []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not paths(operation.method.upper(), operation.path):
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @_fuzz_settings(examples)
            @given(case=operation.as_strategy(generation_mode=mode))
            def one(case) -> None:
                response = send(case.as_transport_kwargs(base_url="http://claimlog", headers=headers))
                sent[0] += 1
                if response.status_code == 503 and response.json()["error"] == "not_yet_visible":
                    return  # ?after= a sequence the log has not reached: read-your-writes says so, as documented
                assert response.status_code < 500, f"{response.status_code}: {response.text[:300]}"
                case.validate_response(response, checks=CHECKS)
                accept(response)

            try:
                one()
            except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - collect every operation's failures
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {error}"[:2000])
    return sent[0], failures


def _is_command(method: str, path: str) -> bool:
    return method == "POST" and (path == "/commands" or path.startswith("/commands/"))


async def _every_event_is_valid(api: Api) -> int:
    head = await api.log.head()
    after = 0
    while after < head:
        page = await api.log.read_log(after_seq=after, limit=1000)
        for stored in page:
            decode(stored.data)  # raises on anything the event models refuse
        after = page[-1].seq
    report = Report()
    await check_log(api.log, report, head=head)
    assert report.ok, report.as_json()
    return head


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_fuzzing_every_command_route_gives_no_5xx_and_publishes_only_valid_events(api: Api):
    loop = asyncio.get_running_loop()
    started = time.monotonic()

    def refused(response: httpx.Response) -> None:
        # A body that is not JSON at all is refused before anything else is looked at.
        assert response.status_code in (401, 422) or response.json()["message"] == BODY_UNPARSABLE, response.text

    for claim_id in SEEDED:  # the claim ids Hypothesis tries first: give its commands a claim to act on
        assert (await api.send("draft_claim", "drafter", **draft(claim_id))).status_code == 201
    head = await api.log.head()
    sent_anonymous, failures = await asyncio.to_thread(
        fuzz, api, loop, _is_command, headers={}, examples=ANONYMOUS_EXAMPLES, accept=refused
    )
    assert await api.log.head() == head, "a request without a valid token published something"
    sent, more = await asyncio.to_thread(fuzz, api, loop, _is_command, headers=_bearer(api), examples=COMMAND_EXAMPLES)
    failures += more
    events = await _every_event_is_valid(api)
    print(
        f"command fuzz: {sent_anonymous} requests without a token, {sent} with one, {events} events published, "
        f"all valid; {time.monotonic() - started:.1f}s"
    )
    assert not failures, "\n\n".join(failures)


SCHEMA_VALID_EXAMPLES = 10  # per command route


def _as_a_client_sends(kwargs: dict) -> dict:
    """A JSON Schema "integer" holds 5.0 too; a generated client sends an int field as 5, and the API takes only that."""
    if isinstance(kwargs.get("json"), dict):
        kwargs["json"] = {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in kwargs["json"].items()}
    return kwargs


# What a request's form earns; the rules' own 422s (a revision the claim does not have) are decisions.
MALFORMED = frozenset({"invalid_request", "duplicate_key", "http_error", "bad_if_match", "bad_character"})


def schema_valid_refusals(api: Api, loop: asyncio.AbstractEventLoop) -> list[str]:
    """Send schema-valid requests to every command route; the ones refused as malformed (400 or 422)."""
    schema = schemathesis.openapi.from_dict(asyncio.run_coroutine_threadsafe(api.http.get("/openapi.json"), loop).result().json())
    send, refused = _sender(api, loop), []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not _is_command(operation.method.upper(), operation.path):
            continue

        @_fuzz_settings(SCHEMA_VALID_EXAMPLES)
        @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
        def one(case) -> None:
            sent = _as_a_client_sends(case.as_transport_kwargs(base_url="http://claimlog", headers=_bearer(api)))
            response = send(sent)
            if response.status_code in (400, 422) and response.json()["error"] in MALFORMED:
                refused.append(f"{sent['url']} {sent.get('headers', {}).get('If-Match')} {sent.get('json')}: {response.text[:200]}")

        one()
    return refused


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_every_request_the_openapi_document_allows_passes_validation(api: Api):
    """The schemas carry the API's rules (id patterns, visible text, at least one field, the If-Match
    version, ``command`` in /commands): a request valid by them is decided (201, or a rule's 404, 409 or 422),
    never refused as malformed."""
    refused = await asyncio.to_thread(schema_valid_refusals, api, asyncio.get_running_loop())
    assert not refused, "\n".join(refused[:20])


@pytest.mark.slow
async def test_fuzzing_the_read_routes_gives_no_5xx(api: Api):
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    sent, failures = await asyncio.to_thread(
        fuzz, api, loop, lambda method, path: method == "GET" and path in READ_ROUTES, headers={}, examples=READ_EXAMPLES
    )
    print(f"read fuzz: {sent} requests; {time.monotonic() - started:.1f}s")
    assert not failures, "\n\n".join(failures)


NUL_READS = (
    "/claims?q=a%00b", "/claims?capability=a%00b", "/claims?technique=a%00b", "/claims?cursor=a%00b",
    "/claims/CLM-0000%00", "/claims/a%00b/counts", "/claims/a%00b/text", "/claims/a%00b/history",
    "/claims/CLM-0000/history?type=a%00b", "/scorecard/a%00b", "/contributors/a%00b", "/pages/claims?q=a%00b",
    "/pages/claims/a%00b", "/pages/scorecard/a%00b", "/claims/a%00b?as_of_seq=1",
)


async def test_a_nul_character_in_any_text_parameter_is_refused_with_a_4xx(api: Api):
    """Found by the read fuzz: PostgreSQL refuses NUL in text, which came back as a 500."""
    answers = {}
    for path in NUL_READS:
        try:
            answers[path] = (await api.http.get(path)).status_code
        except Exception as error:  # noqa: BLE001 - the app raised: a 500 for a client
            answers[path] = type(error).__name__
    assert all(isinstance(s, int) and 400 <= s < 500 for s in answers.values()), answers


async def test_a_body_that_is_not_json_text_gets_a_documented_400_with_the_error_shape(api: Api):
    """Found by the command fuzz: FastAPI's own 400 came as {"detail": ...}, a status the schema did not list."""
    response = await api.http.post(
        "/commands/draft_claim", content=b"\x18\xff", headers={"Content-Type": "application/json", **_bearer(api)}
    )
    assert response.status_code == 400 and response.json() == {"error": "http_error", "message": BODY_UNPARSABLE}
    documented = (await api.http.get("/openapi.json")).json()["paths"]["/commands/draft_claim"]["post"]["responses"]
    assert {"200", "201", "400"} <= set(documented)


async def test_a_feed_position_beyond_any_sequence_is_a_422_not_a_503(api: Api):
    """Found by the read fuzz: JetStream answered "408 Malformed Request", which came back as 503 log_unavailable."""
    response = await api.http.get("/events", params={"after": 2**64})
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"


def _bearer(api: Api) -> dict[str, str]:
    return {"Authorization": f"Bearer {api.tokens['ada']}"}
