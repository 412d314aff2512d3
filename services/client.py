"""A Python client of the command API for pipelines: every command, validated before it leaves, retried safely.

    from services.client import ClaimlogClient

    with ClaimlogClient("http://127.0.0.1:8000", token) as client:
        result = client.attach_source(claim_id="CLM-0338", source_id="s7", relation="supports", measured="...")
        page = client.page("CLM-0338", after=result.last_seq)   # read your own write

Each call gets an ``Idempotency-Key`` (yours, or a fresh one) that every retry repeats, so a retry
after a lost answer publishes nothing twice. Retried: connection errors and timeouts, 429, 502, 503
and 504 (honouring ``Retry-After``), and 409 ``write_conflict``. Anything else the API refuses raises
``CommandRejected`` with its status, machine-readable reason and message. ``AsyncClaimlogClient`` is
the same for asyncio.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_random_exponential,
)

from services.commands.models import COMMAND_TYPES

RETRY_STATUSES = frozenset({429, 502, 503, 504})


class CommandRejected(Exception):
    """The API refused a command (not worth retrying as it is)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


@dataclass(frozen=True)
class Written:
    """What a command did: its events' sequences, and whether it was a retry of one already done."""

    claim_id: str
    command: str
    last_seq: int
    duplicate: bool
    events: list[dict[str, Any]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry: up to ``attempts`` tries, waiting what ``Retry-After`` says,
    else a random time up to ``base_delay`` doubled at each try (full jitter), never over ``max_delay``."""

    attempts: int = 6
    base_delay: float = 0.1
    max_delay: float = 5.0

    def retrying(self) -> Retrying:
        """The retries of one synchronous request (``retrying(post, ...)``): its last answer, or its last error."""
        return Retrying(**self._options())

    def async_retrying(self) -> AsyncRetrying:
        """The retries of one request, for asyncio."""
        return AsyncRetrying(**self._options())

    def _options(self) -> dict[str, Any]:
        return {
            "stop": stop_after_attempt(self.attempts),
            "retry": retry_if_exception_type(httpx.TransportError) | retry_if_result(_retryable),
            "wait": self._wait,
            "retry_error_callback": _last_outcome,
        }

    def _wait(self, state: RetryCallState) -> float:
        outcome = state.outcome
        response = outcome.result() if outcome is not None and not outcome.failed else None
        after = response.headers.get("retry-after") if response is not None else None
        if after and after.isdigit():
            return min(float(after), self.max_delay)
        return wait_random_exponential(multiplier=self.base_delay, max=self.max_delay)(state)


def _last_outcome(state: RetryCallState) -> httpx.Response:
    """The answer of the last try (refused or not: ``_written`` says), or its error raised again."""
    assert state.outcome is not None
    return state.outcome.result()


def _request(command: str, fields: dict[str, Any], idempotency_key: str | None, if_match: int | str | None) -> tuple[str, dict, dict]:
    model = COMMAND_TYPES.get(command)
    if model is None:
        raise ValueError(f"unknown command {command!r}; commands: {', '.join(COMMAND_TYPES)}")
    body = model.model_validate({"command": command, **fields}).model_dump(mode="json", exclude_none=True)
    headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
    if if_match is not None:
        headers["If-Match"] = f'"{if_match}"'
    return f"/commands/{command}", body, headers


def _retryable(response: httpx.Response) -> bool:
    if response.status_code in RETRY_STATUSES:
        return True
    return response.status_code == 409 and _reason(response) == "write_conflict"


def _reason(response: httpx.Response) -> str:
    try:
        return response.json().get("error", "")
    except ValueError:
        return ""


def _written(response: httpx.Response) -> Written:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = {"error": "http_error", "message": response.text[:500]}
        raise CommandRejected(response.status_code, body.get("error", "http_error"), body.get("message", ""))
    body = response.json()
    return Written(body["claim_id"], body["command"], body["last_seq"], body["duplicate"], body["events"])


class _Commands:
    """``client.<command>(**fields)`` for every command of the API."""

    def __getattr__(self, name: str):
        if name in COMMAND_TYPES:
            return lambda **fields: self.send(name, **fields)
        raise AttributeError(name)


class ClaimlogClient(_Commands):
    """The command API over HTTP, synchronously."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 10.0, retry: RetryPolicy = RetryPolicy(), **httpx_options: Any) -> None:
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, headers={"Authorization": f"Bearer {token}"}, **httpx_options
        )
        self._retry = retry

    def send(self, command: str, /, *, idempotency_key: str | None = None, if_match: int | str | None = None, **fields: Any) -> Written:
        """Carry out one command (validated here first); retries transient failures with the same key."""
        path, body, headers = _request(command, fields, idempotency_key, if_match)
        return _written(self._retry.retrying()(self._http.post, path, json=body, headers=headers))

    def page(self, claim_id: str, *, after: int | None = None) -> dict[str, Any]:
        """A claim page; with ``after``, once the read models have applied that sequence."""
        response = self._http.get(f"/claims/{claim_id}", params={"after": after} if after else None)
        response.raise_for_status()
        return response.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ClaimlogClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClaimlogClient(_Commands):
    """The command API over HTTP, for asyncio (``await client.attach_source(...)``)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 10.0, retry: RetryPolicy = RetryPolicy(), **httpx_options: Any) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url, timeout=timeout, headers={"Authorization": f"Bearer {token}"}, **httpx_options
        )
        self._retry = retry

    async def send(self, command: str, /, *, idempotency_key: str | None = None, if_match: int | str | None = None, **fields: Any) -> Written:
        """Carry out one command (validated here first); retries transient failures with the same key."""
        path, body, headers = _request(command, fields, idempotency_key, if_match)
        return _written(await self._retry.async_retrying()(self._http.post, path, json=body, headers=headers))

    async def page(self, claim_id: str, *, after: int | None = None) -> dict[str, Any]:
        """A claim page; with ``after``, once the read models have applied that sequence."""
        response = await self._http.get(f"/claims/{claim_id}", params={"after": after} if after else None)
        response.raise_for_status()
        return response.json()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClaimlogClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
