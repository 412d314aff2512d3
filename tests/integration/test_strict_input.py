"""Input the command API and the bulk path take literally or not at all: a field named twice is refused,
numbers and booleans are not coerced, control and bidi characters never reach a page, and the published
command schemas refuse what the API refuses."""

from __future__ import annotations

import json

import pytest

from events.envelope import VISIBLE_PATTERN
from services.commands.models import command_schemas, parse_command
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft


async def post_raw(api: Api, command: str, body: str, who: str = "ada"):
    headers = {"Authorization": f"Bearer {api.tokens[who]}", "Content-Type": "application/json"}
    path = f"/commands/{command}" if command else "/commands"
    return await api.http.post(path, content=body.encode(), headers=headers)


async def test_a_body_that_names_a_field_twice_is_refused_and_publishes_nothing(api: Api):
    claim = random_claim_id()
    head = await api.log.head()
    body = json.dumps(draft(claim))[:-1] + ', "statement": "The second statement wins silently."}'
    for route in ("draft_claim", ""):
        response = await post_raw(api, route, body if route else body.replace("{", '{"command": "draft_claim", ', 1))
        assert response.status_code == 422, response.text
        assert response.json()["error"] == "duplicate_key"
        assert "the JSON object at $ names 'statement' more than once" in response.json()["message"]
    assert await api.log.head() == head


async def test_a_field_named_twice_deep_in_a_body_is_refused_with_its_path(api: Api):
    claim = random_claim_id()
    body = json.dumps({**draft(claim), "x": [{"k": 1}, {"k": 1}]}).replace('{"k": 1}]', '{"k": 1, "k": 2}]')
    response = await post_raw(api, "draft_claim", body)
    assert response.status_code == 422, response.text
    assert "the JSON object at $.x[1] names 'k' more than once" in response.json()["message"]


@pytest.mark.parametrize("revision", ["true", '"1"', "1.5"])
async def test_a_revision_that_is_not_a_json_integer_is_refused(api: Api, revision: str):
    claim = random_claim_id()
    assert (await api.send("draft_claim", "ada", **draft(claim))).status_code == 201
    body = json.dumps({"claim_id": claim, "review_id": "r1", "verdict": "sound", "confidence": "high", "revision": 1})
    accepted = await post_raw(api, "record_review", body, who="grace")
    assert accepted.status_code == 201, accepted.text
    refused = await post_raw(api, "record_review", body.replace('"review_id": "r1"', '"review_id": "r2"')
                             .replace('"revision": 1', f'"revision": {revision}'), who="grace")
    assert refused.status_code == 422, refused.text
    assert refused.json()["problems"][0]["where"].endswith("revision")


async def test_bidi_and_nul_characters_never_reach_the_page(api: Api):
    claim = random_claim_id()
    sent = await api.send("draft_claim", "ada", **draft(claim))
    filed = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d1",
                           argument="The gain \u202eexe.txt\u202c is on one\x00 benchmark.")
    assert (sent.status_code, filed.status_code) == (201, 201), filed.text
    page = await api.page(claim, filed.json()["last_seq"])
    assert page["disagreements"][0]["argument"] == "The gain exe.txt is on one benchmark."
    html = (await api.http.get(f"/pages/claims/{claim}", params={"after": filed.json()["last_seq"]})).text
    assert "\u202e" not in html and "\x00" not in html
    only_controls = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d2", argument="\u202e\u202c")
    assert only_controls.status_code == 422 and "nothing but control characters" in only_controls.text
    bad_id = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d\u202e3", argument="Why.")
    assert bad_id.status_code == 422


async def test_bidi_marks_and_line_separators_never_reach_the_page(api: Api):
    claim = random_claim_id()
    sent = await api.send("draft_claim", "ada", **draft(claim))
    filed = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d1",
                           argument="Gain \u200fexe.txt\u200e on \u061cone\u2028benchmark\u2029only.")
    assert (sent.status_code, filed.status_code) == (201, 201), filed.text
    page = await api.page(claim, filed.json()["last_seq"])
    assert page["disagreements"][0]["argument"] == "Gain exe.txt on one\nbenchmark\nonly."
    only_marks = await api.send("file_disagreement", "grace", claim_id=claim, disagreement_id="d2", argument="\u200e\u200f\u061c\u2028")
    assert only_marks.status_code == 422 and "nothing but control characters" in only_marks.text


async def test_a_capability_that_climbs_the_path_is_linked_as_one_segment(api: Api):
    claim = random_claim_id()
    capability = f"Planning/../../admin {claim}"
    sent = await api.send("draft_claim", "ada", **{**draft(claim), "capability": capability, "technique": "Plan first"})
    assert sent.status_code == 201, sent.text
    html = (await api.http.get("/pages/scorecard", params={"after": sent.json()["last_seq"]})).text
    assert "/pages/scorecard/Planning%2F..%2F..%2Fadmin%20" in html
    assert "/pages/scorecard/Planning/../" not in html


def test_the_published_command_schemas_carry_the_rules_the_api_enforces():
    schemas = command_schemas()
    revise = schemas["revise_claim"]
    assert {"required": ["statement"], "properties": {"statement": {"not": {"type": "null"}}}} in revise["anyOf"]
    with pytest.raises(ValueError, match="give at least one of"):
        parse_command('{"command": "revise_claim", "claim_id": "CLM-0001", "reason": "nothing"}')
    statement = schemas["draft_claim"]["properties"]["statement"]
    assert statement["pattern"] == VISIBLE_PATTERN and statement["maxLength"] == 20_000
    assert schemas["AnyCommand"]["required"] == ["command"]
    assert schemas["record_review"]["properties"]["revision"]["type"] == "integer"
    assert schemas["attach_source"]["properties"]["source_id"]["pattern"].startswith("^[A-Za-z0-9]")


async def test_claimlog_ingest_reports_a_line_that_names_a_field_twice_and_publishes_nothing_of_it(
    claim_log, tmp_path
):
    from events import Actor
    from services.ingest.bulk import BulkIngest
    from services.ingest.bulk_lines import read_commands

    bot = Actor(id="ingest-bot", kind="model", model="pipeline-2")
    first, second = random_claim_id(), random_claim_id()
    twice = json.dumps({"command": "draft_claim", **draft(second)})[:-1] + ', "capability": "Other"}'
    path = tmp_path / "commands.jsonl"
    path.write_text(json.dumps({"command": "draft_claim", **draft(first)}) + "\n" + twice + "\n")
    lines, errors = read_commands(path, bot)
    assert [(e.number, e.reason) for e in errors] == [(2, "duplicate_key")]
    assert errors[0].message == f"{path}:2: the JSON object at $ names 'capability' more than once; give each field once"
    report = await BulkIngest(claim_log, bot).run(lines)
    assert report.accepted == 1
    assert await claim_log.read_claim(second) == []


def test_a_json_lines_command_that_names_a_field_twice_is_a_line_problem():
    from services.ingest.bulk_lines import LineProblem, _parse

    line = b'{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "a", "reason": "b"}'
    with pytest.raises(LineProblem) as caught:
        _parse(line)
    assert caught.value.reason == "duplicate_key" and "'reason' more than once" in str(caught.value)
    nested = b'{"command": "retract_claim", "claim_id": "CLM-0001", "reason": "a", "x": {"k": 1, "k": 2}}'
    with pytest.raises(LineProblem, match="duplicate_key|more than once"):
        _parse(nested)
