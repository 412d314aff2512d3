"""The tools frontends and producers read claimlog's published documents with, run as they run them.

AsyncAPI's parser and Redocly's linter are npm packages (locked in ``tests/contract/node``, installed by
``make install`` with ``npm ci``, or here when missing); openapi-python-client has an environment of its
own (``.venv/client-generator``, made by ``make install``: its pins of typer and httpx are not claimlog's).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from services.http.app import create_app

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tests" / "contract" / "node"
CLIENT_GENERATOR = Path(sys.prefix) / "client-generator" / "bin" / "openapi-python-client"


def node_tools() -> Path:
    """The contract's npm packages, installed from the lock (``npm ci``) if they are missing."""
    if not (NODE / "node_modules" / "@asyncapi" / "parser").is_dir() or not (NODE / "node_modules" / ".bin" / "redocly").exists():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"npm ci in {NODE} failed:\n{done.stdout}\n{done.stderr}")
    return NODE


def client_generator() -> Path:
    """openapi-python-client, from its own environment."""
    if not CLIENT_GENERATOR.exists():
        pytest.fail(f"{CLIENT_GENERATOR} is missing: run `make install` (it makes .venv/client-generator)")
    return CLIENT_GENERATOR


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of an API that takes commands, as the app publishes it at /openapi.json."""
    return create_app(create_engine("sqlite://"), commands=True).openapi()


def written(document: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(document, indent=1))
    return path


def parse_asyncapi(document: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``@asyncapi/parser`` over ``document``: exit 0 when it reports no error; one JSON line per diagnostic."""
    script = node_tools() / "parse_asyncapi.mjs"
    source = written(document, tmp_path / "asyncapi.json")
    return subprocess.run(["node", str(script), str(source)], capture_output=True, text=True, timeout=120)


def redocly_problems(document: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    """What ``redocly lint`` (its recommended rules) reports on ``document``."""
    source = written(document, tmp_path / "openapi.json")
    command = [str(node_tools() / "node_modules" / ".bin" / "redocly"), "lint", str(source), "--format=json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    start = done.stdout.find("{")
    assert start >= 0, f"redocly printed no report:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout[start:])["problems"]
