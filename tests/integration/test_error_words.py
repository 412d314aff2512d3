"""Commands that do not read are refused in the user's words: what is wrong, where, and what to do, on the HTTP
API and in a JSON Lines file alike (never pydantic's own phrases)."""

from __future__ import annotations

from pathlib import Path

from services.commands.models import COMMAND_TYPES
from services.ingest.bulk_lines import LineError, iter_commands
from tests.integration.command_api import Api

PYDANTIC_WORDS = ("JSON decode error", "Input tag", "expected tags", "Value error", "Not Found")


def assert_plain(message: str) -> None:
    assert not any(words in message for words in PYDANTIC_WORDS), message


async def test_malformed_json_says_where_it_stops_reading_and_what_to_send(api: Api):
    body = b'{"claim_id": "CLM-0338", "slug": "a-claim", "statement": }'
    response = await api.http.post("/commands/draft_claim", content=body, headers={
        "Authorization": f"Bearer {api.tokens['ada']}", "Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    refused = response.json()
    assert refused["error"] == "invalid_request"
    assert_plain(refused["message"])
    [problem] = refused["problems"]
    assert problem["where"] == f"body at character {body.index(b'}')}"
    assert problem["problem"].startswith("not JSON (Expecting value): send one JSON object")


async def test_an_unknown_command_route_names_the_commands_there_are(api: Api):
    response = await api.http.post("/commands/frobnicate", json={"claim_id": "CLM-0338"},
                                   headers={"Authorization": f"Bearer {api.tokens['ada']}"})
    assert response.status_code == 404
    refused = response.json()
    assert refused["error"] == "unknown_command"
    assert_plain(refused["message"])
    assert refused["message"].startswith("there is no command 'frobnicate': the commands are draft_claim, revise_claim")
    assert all(name in refused["message"] for name in COMMAND_TYPES) and "POST /commands/NAME" in refused["message"]
    # Another unknown route is still the plain 404 it was.
    assert (await api.http.get("/no-such-page")).json()["error"] == "http_error"


async def test_an_unknown_command_in_the_body_names_the_field_and_the_commands(api: Api):
    response = await api.http.post("/commands", json={"command": "frobnicate", "claim_id": "CLM-0338"},
                                   headers={"Authorization": f"Bearer {api.tokens['ada']}"})
    assert response.status_code == 422, response.text
    refused = response.json()
    assert_plain(refused["message"])
    assert refused["problems"][0]["where"] == "body.command"
    assert refused["problems"][0]["problem"].startswith("there is no command 'frobnicate': the commands are draft_claim")


def test_a_json_lines_command_with_an_unknown_name_names_the_line_the_field_and_the_commands(tmp_path: Path):
    path = tmp_path / "commands.jsonl"
    path.write_text('{"command": "draft_claim", "claim_id": "CLM-0338"}\n\n{"command": "frobnicate", "claim_id": "CLM-0338"}\n'
                    '{"claim_id": "CLM-0338"}\n')
    errors = [item for item in iter_commands(path) if isinstance(item, LineError)]
    assert [(e.number, e.reason) for e in errors] == [(1, "invalid_command"), (3, "invalid_command"), (4, "invalid_command")]
    for error in errors:
        assert_plain(error.message)
    assert errors[1].message.startswith(f"{path}:3: line.command: there is no command 'frobnicate': the commands are "
                                        "draft_claim, revise_claim")
    assert errors[2].message.startswith(f"{path}:4: line.command: no 'command' field: name the command, one of draft_claim")
    assert "draft_claim.slug: Field required" in errors[0].message
