"""What browsers are told: security headers on every answer, and CORS for the frontends a deployment names.

Every answer says ``nosniff`` (a JSON body is never run as a script or page) and may not be framed
(``X-Frame-Options: DENY`` and ``frame-ancestors 'none'``). Its Content-Security-Policy lets a page load
scripts, styles and images from the API itself only; a page that needs more (the API docs, with their
inline start-up script) sets its own policy, made with ``policy_for``, and keeps it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from starlette.datastructures import MutableHeaders
from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.runtime.settings import Settings

FIXED = {
    "default-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
PAGES_POLICY = {"script-src": "'self'", "style-src": "'self'", "img-src": "'self' data:"}
# Headers a frontend reads from answers: the claim version for If-Match, where a write's claim is, when to retry.
EXPOSED = ("ETag", "Location", "Retry-After")
_INLINE = re.compile(r"<(script|style)\b([^>]*)>(.*?)</\1\s*>", re.S | re.I)


def policy_for(sources: dict[str, str], html: str | None = None) -> str:
    """A Content-Security-Policy: the fixed directives, ``sources``, and the hash of each inline script and
    style ``html`` holds (so a generated page's own inline code runs, and nothing injected into it does)."""
    directives = {**FIXED, **sources}
    for kind, attributes, body in _INLINE.findall(html or ""):
        name = f"{kind.lower()}-src"
        allowed = directives.get(name, FIXED["default-src"])
        # A hash would switch 'unsafe-inline' off (CSP level 2): a policy that allows it needs none.
        if "src=" not in attributes and "'unsafe-inline'" not in allowed:
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            directives[name] = f"{allowed} 'sha256-{digest}'"
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def with_policy(page: HTMLResponse, sources: dict[str, str]) -> HTMLResponse:
    """``page`` with a policy of its own: ``sources`` and the hashes of its inline scripts and styles."""
    page.headers["Content-Security-Policy"] = policy_for(sources, page.body.decode())
    return page


HEADERS = (
    ("content-security-policy", policy_for(PAGES_POLICY)),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
)


class SecurityHeaders:
    """ASGI middleware: the headers above on every answer, unless the route set one of them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS:
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, sending)


@dataclass(frozen=True)
class Cors:
    """Which browser frontends on other origins may call the API (none by default), with which methods and
    request headers."""

    origins: tuple[str, ...] = ()
    methods: tuple[str, ...] = ("GET", "POST")
    headers: tuple[str, ...] = ("Authorization", "Content-Type", "Idempotency-Key", "If-Match", "Claimlog-After")

    @classmethod
    def from_settings(cls, settings: Settings) -> Cors:
        """What a deployment configured (``CLAIMLOG_CORS_*``)."""
        return cls(
            origins=tuple(settings.cors_allow_origins),
            methods=tuple(settings.cors_allow_methods),
            headers=tuple(settings.cors_allow_headers),
        )


def install_browser_policy(app: FastAPI, cors: Cors) -> None:
    """CORS when origins are configured, and the security headers outermost, so that every answer has them:
    preflights, refusals of the body limits, errors."""
    if cors.origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors.origins),
            allow_methods=list(cors.methods),
            allow_headers=list(cors.headers),
            expose_headers=list(EXPOSED),
        )
    app.add_middleware(SecurityHeaders)
