"""What the API refuses before doing any work: bodies over a size, JSON nested too deep.

``BodyLimits`` is ASGI middleware. A declared ``Content-Length`` over the limit is answered 413 without
reading a byte; a body without one is read only up to the limit. A JSON body nested deeper than the
limit is answered 422 before it is parsed (Python's parser recurses, and pydantic would see it only
after). Long strings are the models' business: every text field of a command has a ``max_length``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.runtime.settings import Settings

WITHOUT_BODY = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
# A JSON string (escapes included) or one bracket: brackets inside strings do not nest anything.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


@dataclass(frozen=True)
class Guards:
    """The API's limits (defaults as in ``Settings``)."""

    max_body_bytes: int = 1_048_576
    max_json_depth: int = 32
    rate_limit_per_minute: float = 6000.0
    rate_limit_burst: int = 1000
    ready_max_lag_events: int = 1000
    live_streams: int = 1_000
    live_streams_per_client: int = 16

    @classmethod
    def from_settings(cls, settings: Settings) -> Guards:
        """The limits a deployment configured."""
        return cls(
            max_body_bytes=settings.max_body_bytes,
            max_json_depth=settings.max_json_depth,
            rate_limit_per_minute=settings.rate_limit_per_minute,
            rate_limit_burst=settings.rate_limit_burst,
            ready_max_lag_events=settings.ready_max_lag_events,
            live_streams=settings.live_streams,
            live_streams_per_client=settings.live_streams_per_client,
        )


def too_deep(body: bytes, limit: int) -> int | None:
    """The byte offset where ``body``'s JSON nesting passes ``limit`` levels, or None."""
    depth = 0
    for token in _TOKEN.finditer(body):
        char = body[token.start()]
        if char in b"[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif char in b"]}":
            depth -= 1
    return None


class BodyLimits:
    """Refuses oversized request bodies (413) and over-deep JSON ones (422) before the app sees them."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_depth: int) -> None:
        self.app, self.max_bytes, self.max_depth = app, max_bytes, max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in WITHOUT_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await _answer(send, 413, self._too_large(f"declares {int(declared)} bytes"))
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await _answer(send, 413, self._too_large(f"passed {self.max_bytes} bytes while being read"))
                return
            more = message.get("more_body", False)
        if "json" in headers.get("content-type", "json") and (at := too_deep(bytes(body), self.max_depth)) is not None:
            await _answer(send, 422, _too_deep(self.max_depth, at))
            return
        await self.app(scope, _replay(bytes(body), receive), send)

    def _too_large(self, how: str) -> dict:
        return {
            "error": "payload_too_large",
            "message": f"the request body {how}; the limit is {self.max_bytes} bytes "
            "(CLAIMLOG_MAX_BODY_BYTES). Nothing was parsed or published.",
        }


def _too_deep(limit: int, at: int) -> dict:
    problem = f"JSON nested deeper than {limit} levels (the bracket at byte {at})"
    return {
        "error": "invalid_request",
        "message": f"body: {problem}; nothing was parsed or published",
        "problems": [{"where": "body", "problem": problem}],
    }


def _replay(body: bytes, receive: Receive) -> Receive:
    """The request's body, already read, handed to the app as one message; then the real channel."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send: Send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if status == 413:
        headers.append((b"connection", b"close"))  # the unread rest of the body is not worth reading
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
