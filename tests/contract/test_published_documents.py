"""The published documents pass the tools their readers check them with: the OpenAPI document is valid 3.1
(openapi-spec-validator) and has no error by Redocly's recommended rules; the AsyncAPI document passes
AsyncAPI's parser with its channels' parameters declared. And they say what the API does."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from openapi_spec_validator import OpenAPIV31SpecValidator, validate

from services.asyncapi import asyncapi_document
from services.commands.models import COMMAND_TYPES
from tests.contract.tools import openapi_document, parse_asyncapi, redocly_problems

WRITES = {f"/commands/{name}" for name in COMMAND_TYPES} | {"/commands"}


@pytest.fixture(scope="module")
def openapi() -> dict:
    return openapi_document()


def test_the_openapi_document_is_valid_openapi_3_1(openapi: dict):
    assert openapi["openapi"].startswith("3.1.")
    validate(openapi, cls=OpenAPIV31SpecValidator)  # raises with where and why


def test_the_validator_refuses_an_openapi_3_2_keyword_in_a_3_1_document(openapi: dict):
    """What FastAPI writes for an event stream (``itemSchema``) is refused: the check above can fail."""
    broken = copy.deepcopy(openapi)
    stream = broken["paths"]["/live"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    stream["itemSchema"] = stream.pop("x-itemSchema")
    with pytest.raises(Exception, match="itemSchema"):
        validate(broken, cls=OpenAPIV31SpecValidator)


def test_redocly_lint_finds_no_error(openapi: dict, tmp_path: Path):
    errors = [p for p in redocly_problems(openapi, tmp_path) if p["severity"] == "error"]
    assert not errors, json.dumps(errors, indent=1)[:4000]


def test_redocly_lint_reports_a_write_without_security(openapi: dict, tmp_path: Path):
    broken = copy.deepcopy(openapi)
    del broken["paths"]["/commands"]["post"]["security"]
    found = [p["ruleId"] for p in redocly_problems(broken, tmp_path) if p["severity"] == "error"]
    assert found == ["security-defined"], found


def test_every_write_takes_a_bearer_token_and_every_read_needs_none(openapi: dict):
    assert openapi["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": openapi["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            expected = [{"bearerAuth": []}] if path in WRITES else []
            assert operation["security"] == expected, f"{method.upper()} {path}"
            names = [parameter["name"].lower() for parameter in operation.get("parameters", [])]
            assert "authorization" not in names, f"{method.upper()} {path} declares the token as a parameter"
            if path in WRITES:
                assert "401" in operation["responses"], f"{method.upper()} {path}"


def test_the_document_names_its_licence_and_its_server(openapi: dict):
    assert openapi["info"]["license"]["name"]
    assert openapi["servers"] == [{"url": "/", "description": "The API serving this document."}]


def test_the_schemas_are_as_strict_as_the_api(openapi: dict):
    claim = openapi["paths"]["/claims/{claim_key}"]["get"]
    parameters = {p["name"]: p for p in claim["parameters"]}
    for name in ("after", "claimlog-after"):
        schema = {key: value for key, value in parameters[name]["schema"].items() if key != "title"}
        assert schema == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}, name
    assert parameters["as_of_seq"]["schema"]["type"] == "string"
    assert "pattern" in parameters["as_of_seq"]["schema"]
    history = {p["name"]: p for p in openapi["paths"]["/claims/{claim_key}/history"]["get"]["parameters"]}
    assert history["type"]["schema"]["items"]["enum"]
    assert "beyond_log_head" in claim["responses"]["422"]["description"]
    assert "bad_character" in claim["responses"]["400"]["description"]
    assert "idempotency_key_reused" in openapi["paths"]["/commands"]["post"]["responses"]["422"]["description"]


def test_the_command_union_requires_its_discriminator_in_every_member(openapi: dict):
    union = openapi["paths"]["/commands"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert union["discriminator"]["propertyName"] == "command"
    assert set(union["discriminator"]["mapping"]) == set(COMMAND_TYPES)
    schemas = openapi["components"]["schemas"]
    for member in union["oneOf"]:
        assert "command" in schemas[member["$ref"].rsplit("/", 1)[-1]]["required"], member
    own = openapi["paths"]["/commands/draft_claim"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "command" not in schemas[own["$ref"].rsplit("/", 1)[-1]]["required"], "optional on the command's own route"


def test_a_refusal_of_the_text_page_is_documented_as_json(openapi: dict):
    responses = openapi["paths"]["/claims/{claim_key}/text"]["get"]["responses"]
    assert set(responses["200"]["content"]) == {"text/plain"}
    assert set(responses["404"]["content"]) == {"application/json"}


def test_health_and_metrics_document_their_refusals(openapi: dict):
    for path in ("/health", "/health/live", "/health/ready", "/metrics", "/asyncapi.json"):
        assert "4XX" in openapi["paths"][path]["get"]["responses"], path


def test_the_asyncapi_parser_accepts_the_document_with_claim_id_declared(tmp_path: Path):
    document = asyncapi_document()
    for name, channel in document["channels"].items():
        assert "{claim_id}" in channel["address"], name
        assert set(channel["parameters"]) == {"claim_id"}, name
        assert "bindings" not in channel, f"{name}: the NATS channel binding has no fields"
        assert f"claims.*.<claim_id>.{name}" in channel["description"], f"{name}: the stored subject"
    done = parse_asyncapi(document, tmp_path)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"


def test_the_asyncapi_parser_checks_the_parameters_against_the_addresses(tmp_path: Path):
    """A channel whose address names a parameter it does not declare is refused: the check above can fail."""
    document = asyncapi_document()
    channel = next(iter(document["channels"].values()))
    channel["parameters"] = {"claim": channel["parameters"]["claim_id"]}
    done = parse_asyncapi(document, tmp_path)
    assert done.returncode == 1 and "claim_id" in done.stdout, f"{done.stdout}\n{done.stderr}"


def test_the_committed_asyncapi_document_is_the_served_one():
    committed = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "asyncapi.json").read_text())
    assert committed == json.loads(json.dumps(asyncapi_document())), "run `claimlog schema export` and commit"
