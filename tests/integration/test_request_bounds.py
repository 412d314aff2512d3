"""Numbers past the log's largest sequence are refused with a 4xx that names the parameter and its range,
never passed on to the database (an overflow: a 500): every integer parameter the OpenAPI document
declares, walked, on a real nats-server, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx

from services.log import MAX_SEQ
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

TOO_LARGE = (str(2**63), str(10**20), "9" * 5000)  # the last past what Python converts to int
# Seen in the wild: each must be among the parameters the walk finds, so the walk cannot silently find none.
KNOWN = {
    ("GET", "/claims", "query", "changed_since_seq"),
    ("GET", "/claims/{claim_key}", "query", "after"),
    ("GET", "/claims/{claim_key}", "header", "claimlog-after"),
    ("GET", "/unreadable-events", "query", "after"),
    ("GET", "/contributors/{actor_id}", "query", "before"),
    ("GET", "/claims/{claim_key}/history", "query", "after_seq"),
    ("GET", "/events", "query", "after"),
    ("POST", "/claims/counts", "query", "after"),
}


def integer_parameters(spec: dict) -> Iterator[tuple[str, str, str, str]]:
    """(method, path, where, name) of every parameter the document types as an integer (or an optional one)."""
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                types = {option.get("type") for option in schema.get("anyOf", [schema])}
                if "integer" in types:
                    yield method.upper(), path, parameter["in"], parameter["name"]


async def ask(api: Api, method: str, path: str, where: str, name: str, value: str, *, claim: str) -> httpx.Response:
    """One request with ``value`` as the parameter, every path parameter a real key, the rest valid."""
    url = path.replace("{claim_key}", claim).replace("{actor_id}", "ada").replace("{capability}", "Planning")
    params = {name: value} if where == "query" else {}
    headers = {name: value} if where == "header" else {}
    body = {"claim_ids": [claim]} if method == "POST" else None
    return await api.http.request(method, url, params=params, headers=headers, json=body)


async def test_every_integer_parameter_refuses_numbers_past_the_largest_sequence_with_422(api: Api):
    claim = random_claim_id()
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    walked = set(integer_parameters((await api.http.get("/openapi.json")).json()))
    assert walked >= KNOWN, KNOWN - walked
    wrong = []
    for method, path, where, name in sorted(walked):
        for value in TOO_LARGE:
            response = await ask(api, method, path, where, name, value, claim=claim)
            problems = response.json().get("problems", []) if response.status_code == 422 else []
            named = [p["problem"] for p in problems if p["where"] == f"{where}.{name}"]
            if not named or not any(str(MAX_SEQ) in p or "maximum size" in p or "less than" in p for p in named):
                wrong.append(f"{method} {path} {where} {name}={value[:25]}: {response.status_code} {response.text[:300]}")
    assert not wrong, "\n".join(wrong)


async def test_the_largest_sequence_itself_reaches_the_database_and_is_answered(api: Api):
    """2^63-1 passes validation: SQLite's INTEGER and PostgreSQL's BIGINT hold it, so no parameter gives a 5xx."""
    claim = random_claim_id()
    last = (await api.send("draft_claim", "ada", **draft(claim))).json()["last_seq"]
    await api.page(claim, after=last)
    for method, path, where, name in integer_parameters((await api.http.get("/openapi.json")).json()):
        response = await ask(api, method, path, where, name, str(MAX_SEQ), claim=claim)
        assert response.status_code < 500, (method, path, name, response.text)
    listed = await api.http.get("/claims", params={"changed_since_seq": MAX_SEQ})
    assert listed.status_code == 200 and listed.json()["items"] == []
    unreadable = await api.http.get("/unreadable-events", params={"after": MAX_SEQ})
    assert unreadable.status_code == 200 and unreadable.json() == []
    contributor = await api.http.get("/contributors/ada", params={"before": MAX_SEQ})
    assert contributor.status_code == 200 and contributor.json()["activity"][0]["seq"] == last


async def test_the_probes_that_answered_500_answer_4xx_with_the_parameter_and_its_range(api: Api):
    claim = random_claim_id()
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    for url in (
        "/claims?changed_since_seq=9223372036854775808",
        "/unreadable-events?after=9223372036854775808",
        "/contributors/ada?before=99999999999999999999",
        f"/claims/{claim}?after=99999999999999999999",
    ):
        response = await api.http.get(url)
        assert response.status_code == 422, (url, response.text)
        body = response.json()
        assert body["error"] == "invalid_request" and str(MAX_SEQ) in body["message"], (url, body)
        assert url.split("?")[1].split("=")[0] in body["message"], (url, body)
    header = await api.http.get(f"/claims/{claim}", headers={"Claimlog-After": "9223372036854775808"})
    assert header.status_code == 422 and "header.claimlog-after" in header.json()["message"]

    # The listing page answers its form's way: the form again, with what was wrong, and a 400.
    page = await api.http.get("/pages/claims", params={"changed_since_seq": 2**63})
    assert page.status_code == 400 and "changed_since_seq" in page.text and str(MAX_SEQ) in page.text


async def test_an_as_of_sequence_past_the_largest_is_a_bad_as_of_like_any_other(api: Api):
    """as_of_seq keeps its own 400 ``bad_as_of`` (as for a negative one or a word), saying the range."""
    claim = random_claim_id()
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    for path in (f"/claims/{claim}", "/scorecard", "/scorecard/Planning"):
        for value in ("99999999999999999999", str(2**63), "9" * 5000):
            response = await api.http.get(path, params={"as_of_seq": value})
            assert response.status_code == 400, (path, value[:25], response.text)
            body = response.json()
            assert body["error"] == "bad_as_of" and f"beyond any log sequence (0 to {MAX_SEQ})" in body["message"]
            assert len(body["message"]) < 200  # the number is shortened, not echoed whole


async def test_a_cursor_crafted_with_a_sort_key_past_64_bits_is_a_bad_cursor(api: Api):
    """The cursor's fingerprint can be made by anyone; the sort key inside it is checked before the query."""
    capability = f"Capability {random_claim_id()}"
    for _ in range(2):
        last = (await api.send("draft_claim", "ada", **{**draft(random_claim_id()), "capability": capability})).json()
    await api.page(last["claim_id"], after=last["last_seq"])
    query = {"capability": capability, "sort": "recent", "limit": 1}
    cursor = (await api.http.get("/claims", params=query)).json()["next_cursor"]
    fingerprint, key, claim_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    assert isinstance(key, int)
    for crafted_key in (2**63, -(2**63) - 1, 10**30):
        crafted = base64.urlsafe_b64encode(json.dumps([fingerprint, crafted_key, claim_id]).encode()).decode().rstrip("=")
        response = await api.http.get("/claims", params={**query, "cursor": crafted})
        assert response.status_code == 400 and response.json()["error"] == "bad_cursor", response.text
    assert (await api.http.get("/claims", params={**query, "cursor": cursor})).status_code == 200


async def test_an_if_match_version_past_the_largest_sequence_is_a_bad_if_match_and_publishes_nothing(api: Api):
    claim = random_claim_id()
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    head = await api.log.head()
    for version in ("9999999999999999999", '"9223372036854775808"', 'W/"9223372036854775808"'):
        response = await api.send(
            "attach_source", "bot", headers={"If-Match": version}, claim_id=claim, source_id="s", relation="supports",
            measured="A.",
        )
        assert response.status_code == 400, (version, response.text)
        assert response.json()["error"] == "bad_if_match" and str(MAX_SEQ) in response.json()["message"]
    assert await api.log.head() == head
