"""Fetching a log's resources over HTTP, at a bounded rate, with nothing but the log's URL."""

from __future__ import annotations

import asyncio
import time

import httpx

from services.auditor.errors import AuditFailure


class LogClient:
    """GETs under ``<url>/log/``: a resource that is not there is an ``AuditFailure`` naming it; and, for the
    replay's comparison, JSON from the API's root (``json``)."""

    def __init__(self, url: str, *, per_second: float = 200.0, http: httpx.AsyncClient | None = None) -> None:
        self.root = url.rstrip("/")
        self.base = self.root + "/log/"
        self._http = http or httpx.AsyncClient(timeout=30.0, headers={"Accept-Encoding": "gzip, identity"})
        self._gap, self._next = 1.0 / per_second, 0.0

    async def __call__(self, path: str) -> bytes:
        await self._turn()
        try:
            answer = await self._http.get(self.base + path)
        except httpx.HTTPError as error:
            raise AuditFailure(f"{self.base + path} cannot be fetched: {error}") from None
        if answer.status_code != 200:
            raise AuditFailure(f"{self.base + path} answered {answer.status_code}: {answer.text[:200]}")
        return answer.content

    async def json(self, path: str) -> tuple[int, object]:
        """The status and parsed JSON of ``GET <url><path>`` (a path from the API's root, as ``/scorecard``)."""
        await self._turn()
        try:
            answer = await self._http.get(self.root + path)
            return answer.status_code, answer.json()
        except httpx.HTTPError as error:
            raise AuditFailure(f"{self.root + path} cannot be fetched: {error}") from None
        except ValueError:
            return answer.status_code, answer.text[:200]

    async def _turn(self) -> None:
        """Wait for this request's turn: at most ``per_second`` requests a second."""
        wait = self._next - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._next = max(self._next, time.monotonic()) + self._gap

    async def close(self) -> None:
        await self._http.aclose()
