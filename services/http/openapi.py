"""The OpenAPI document as published: FastAPI's, made what OpenAPI 3.1 and the tools that read it accept.

FastAPI describes a Server-Sent Events response with ``itemSchema``, a keyword of OpenAPI 3.2 that a 3.1
document may not hold: here the stream is a string (what 3.1 can say), its messages' schema kept as the
extension ``x-itemSchema``. ``POST /commands`` chooses its command by the ``command`` field, which each
command's own route leaves optional: the union's members are copies of the commands' schemas that
require it, so a discriminating reader (a client generator, a linter) finds the property in each. An
operation that needs no token (every read) says so with an empty ``security``; the writes name the
bearer scheme (``services/http/commands.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

# No licence has been granted for the API or its documents yet; OpenAPI asks for the licence's name.
LICENSE = {"name": "No licence granted: all rights reserved"}
SSE = "text/event-stream"
EVENTS_DESCRIPTION = "A stream of Server-Sent Events (`event`, `data`, `id`, `retry` lines); each message as `x-itemSchema`."


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the published document (built once, then kept, as FastAPI keeps it)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = published(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def published(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (FastAPI's) with the event streams said in OpenAPI 3.1 and the command union discriminable."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("security", [])  # public: said, so a reader knows it needs no token
            for response in operation.get("responses", {}).values():
                _stream_as_string(response.get("content", {}))
    commands = document.get("paths", {}).get("/commands", {}).get("post")
    if commands is not None:
        _discriminable(commands["requestBody"]["content"]["application/json"]["schema"], document["components"]["schemas"])
    return document


def _stream_as_string(content: dict[str, Any]) -> None:
    stream = content.get(SSE)
    if stream is not None and "itemSchema" in stream:
        content[SSE] = {"schema": {"type": "string", "description": EVENTS_DESCRIPTION}, "x-itemSchema": stream["itemSchema"]}


def _discriminable(union: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Point the union's members (and its discriminator's mapping) at copies of them that require its property."""
    discriminator = union.get("discriminator")
    if discriminator is None:
        return
    name = discriminator["propertyName"]
    renamed: dict[str, str] = {}
    for member in union.get("oneOf", []):
        ref = member.get("$ref", "")
        component = ref.rsplit("/", 1)[-1]
        required = copy.deepcopy(schemas[component])
        required["required"] = [name, *(field for field in required.get("required", []) if field != name)]
        required["title"] = f"{component}Named"  # a generator names its class by the title: one per schema
        schemas[f"{component}Named"] = required
        renamed[ref] = member["$ref"] = f"#/components/schemas/{component}Named"
    mapping = discriminator.get("mapping", {})
    for value, ref in mapping.items():
        mapping[value] = renamed.get(ref, ref)
