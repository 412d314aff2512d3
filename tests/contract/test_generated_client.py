"""A client generated from the OpenAPI document (openapi-python-client, as a frontend or producer would
make it) authenticates with the document's bearer scheme and writes a disagreement to a running API, on a
real nats-server with a running projector, served over a loopback port."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from tests.contract.tools import client_generator, written
from tests.integration.command_api import Api, draft, running_api
from tests.integration.test_live import served

PACKAGE = "claimlog_api_client"


@pytest.fixture
async def api(claim_log, engine) -> AsyncIterator[Api]:
    async for running in running_api(claim_log, engine):
        yield running


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[list[str]]:
    """Forget the generated package after the test: another test generates its own."""
    sys.path.insert(0, str(tmp_path))
    yield sys.path
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


def generate(document: dict, into: Path) -> ModuleType:
    """The client openapi-python-client generates from ``document``, imported; any warning of the generator fails."""
    generator = client_generator()
    config = into / "generator.yaml"
    config.write_text(f"package_name_override: {PACKAGE}\n")
    command = [
        str(generator), "generate", "--path", str(written(document, into / "openapi.json")), "--config", str(config),
        "--meta", "none", "--output-path", str(into / PACKAGE), "--fail-on-warning",
    ]
    env = {**os.environ, "PATH": f"{generator.parent}{os.pathsep}{os.environ['PATH']}"}  # its ruff formats the code
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return importlib.import_module(PACKAGE)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_generated_client_authenticates_and_files_a_disagreement(api: Api, tmp_path: Path, imported, claim_id: str):
    started = time.monotonic()
    async with served(api) as url:
        async with httpx.AsyncClient() as http:
            document = (await http.get(f"{url}/openapi.json")).json()
        client = generate(document, tmp_path)
        models = importlib.import_module(f"{PACKAGE}.models")
        commands = f"{PACKAGE}.api.commands"
        draft_claim = importlib.import_module(f"{commands}.draft_claim_commands_draft_claim_post")
        file_disagreement = importlib.import_module(f"{commands}.file_disagreement_commands_file_disagreement_post")
        get_claim = importlib.import_module(f"{PACKAGE}.api.claims.get_claim_claims_claim_key_get")

        # The generator read the security of the writes: they take only a client that carries a token.
        assert inspect.signature(file_disagreement.asyncio_detailed).parameters["client"].annotation is client.AuthenticatedClient
        anonymous = client.AuthenticatedClient(base_url=url, token="not-a-token")
        refused = await draft_claim.asyncio_detailed(client=anonymous, body=models.DraftClaim.from_dict(draft(claim_id)))
        assert refused.status_code == 401 and refused.parsed.error == "unauthorized", refused.content

        grace = client.AuthenticatedClient(base_url=url, token=api.tokens["grace"])
        drafted = await draft_claim.asyncio_detailed(client=grace, body=models.DraftClaim.from_dict(draft(claim_id)))
        assert drafted.status_code == 201, drafted.content
        body = models.FileDisagreement(claim_id=claim_id, disagreement_id="d1", argument="Two backbones are too few.")
        filed = await file_disagreement.asyncio_detailed(client=grace, body=body)
        assert filed.status_code == 201, filed.content
        assert isinstance(filed.parsed, models.CommandResult) and [e.to_dict()["type"] for e in filed.parsed.events] == ["DisagreementFiled"]

        page = await get_claim.asyncio_detailed(claim_id, client=client.Client(base_url=url), after=filed.parsed.last_seq)
        assert page.status_code == 200, page.content
        disagreements = page.parsed.to_dict()["disagreements"]
        assert [(d["disagreement_id"], d["filed"]["by"]["id"]) for d in disagreements] == [("d1", "grace")]
    print(f"generated client: {time.monotonic() - started:.1f}s")
