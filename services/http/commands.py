"""The command routes: ``POST /commands/{command}`` (one typed route per command) and ``POST /commands``.

Who acts is the owner of the bearer token, never anything in the body. ``Idempotency-Key`` makes a
retry publish once; ``If-Match: "<version>"`` (the claim page's ETag, its last sequence) makes a
write against an old version fail with 409. Every answer carries the stream sequence of the events,
to read after with ``?after=`` (read your writes).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, WithJsonSchema

from events import Actor
from services.actors import ActorsUnavailable, TokenExpired
from services.commands.decide import Kind, Rejected
from services.commands.models import (
    COMMAND_TYPES,
    AnyCommand,
    Command,
    DuplicateKeyError,
    refuse_duplicate_keys,
)
from services.commands.service import Outcome
from services.log import MAX_SEQ, LogError
from services.read_api.state import Api, api_state

# How each kind of rejection is said over HTTP (docs/commands.md has the table).
STATUS_OF = {Kind.NOT_FOUND: 404, Kind.CONFLICT: 409, Kind.FORBIDDEN: 403, Kind.INVALID: 422}


async def single_keys(request: Request) -> None:
    """Refuse a body that names a field twice (422 ``duplicate_key``): JSON parsers keep the last silently."""
    try:
        refuse_duplicate_keys(await request.body())
    except DuplicateKeyError as error:
        raise HTTPException(422, detail={"error": "duplicate_key", "message": str(error)}) from None


router = APIRouter(tags=["commands"], dependencies=[Depends(single_keys)])
_VERSION = re.compile(r'^(?:W/)?"?([0-9]{1,19})"?$')


class StoredEventRef(BaseModel):
    """One event a command produced and where the log stored it."""

    event_id: str
    type: str
    seq: int


class CommandResult(BaseModel):
    """What a command did. ``last_seq`` is the claim's new version and the sequence to read after."""

    claim_id: str
    command: str
    duplicate: bool = Field(description="True when this was a retry of a command already carried out.")
    events: list[StoredEventRef]
    last_seq: int


class CommandError(BaseModel):
    """Why a command was refused: a machine-readable reason and a sentence."""

    error: str
    message: str


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": CommandError} for status in (400, 401, 403, 404, 409, 413, 422, 429, 503)
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": CommandResult, "description": "A retry of a command already carried out (`duplicate: true`)."},
    **ERRORS,
}


def unauthorized(message: str, error: str = "unauthorized") -> HTTPException:
    return HTTPException(
        401, detail={"error": error, "message": message}, headers={"WWW-Authenticate": 'Bearer realm="claimlog"'}
    )


async def current_actor(api: Api, authorization: Annotated[str | None, Header()] = None) -> Actor:
    """The actor whose bearer token came with the request; 401 for none, unknown or revoked (``token_expired``
    for one past its expiry)."""
    if not authorization or not authorization.lower().startswith("bearer "):
        raise unauthorized("writes need a bearer token: Authorization: Bearer <token> (see `claimlog actors add`)")
    try:
        store = await api.actor_store()
    except ActorsUnavailable as error:
        raise unauthorized(str(error)) from None
    try:
        actor = await store.authenticate(authorization[7:].strip())
    except TokenExpired as expired:
        raise unauthorized(str(expired), error="token_expired") from None
    if actor is None:
        raise unauthorized("the bearer token is unknown or revoked")
    return actor


async def allowed_actor(api: Api, actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
    """The authenticated actor, if it has writes left (``services/commands/rate_limit.py``); 429 if not."""
    limiter = api.rate_limiter
    throttled = await limiter.take(actor.id) if limiter is not None else None
    if throttled is not None:
        raise HTTPException(
            429,
            detail={"error": "rate_limited", "message": throttled.message},
            headers={"Retry-After": str(throttled.retry_after)},
        )
    return actor


def expected_version(if_match: str | None) -> int | None:
    """The version an ``If-Match`` header names (``"42"``, ``42`` or ``W/"42"``), or None."""
    if if_match is None or if_match.strip() == "*":
        return None
    found = _VERSION.match(if_match.strip())
    if found is None or int(found.group(1)) > MAX_SEQ:
        raise HTTPException(
            400,
            detail={
                "error": "bad_if_match",
                "message": f'If-Match takes the claim version (a log sequence, 0 to {MAX_SEQ}), e.g. If-Match: "42"',
            },
        )
    return int(found.group(1))


async def run(
    request: Request, command: Command, actor: Actor, idempotency_key: str | None, if_match: str | None
) -> JSONResponse:
    service = api_state(request.app).commands
    assert service is not None, "the command routes are mounted only on an app that writes"
    try:
        outcome = await service.execute(
            command, actor, idempotency_key=idempotency_key, expected_version=expected_version(if_match)
        )
    except Rejected as rejected:
        return JSONResponse({"error": rejected.reason, "message": rejected.message}, status_code=STATUS_OF[rejected.kind])
    except LogError as error:
        body = {"error": "log_unavailable", "message": f"the log did not take the command: {error}"}
        return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
    return _result(outcome)


def _result(outcome: Outcome) -> JSONResponse:
    body = CommandResult(
        claim_id=outcome.claim_id,
        command=outcome.command,
        duplicate=outcome.duplicate,
        events=[StoredEventRef(event_id=e.event_id, type=e.type, seq=e.seq) for e in outcome.events],
        last_seq=outcome.last_seq,
    )
    headers = {"ETag": f'"{outcome.last_seq}"', "Location": f"/claims/{outcome.claim_id}?after={outcome.last_seq}"}
    return JSONResponse(body.model_dump(), status_code=200 if outcome.duplicate else 201, headers=headers)


IdempotencyKey = Annotated[
    str | None,
    Header(
        max_length=200,
        description="Any string unique to this command; a retry with the same key publishes nothing new.",
    ),
]


def _decimal_at_most(limit: int) -> str:
    """A regular expression of the decimal numbers from 0 to ``limit`` (leading zeros allowed)."""
    digits = str(limit)
    branches = [f"[0-9]{{1,{len(digits) - 1}}}"] if len(digits) > 1 else []
    for at, digit in enumerate(digits):
        if digit != "0":
            rest = len(digits) - at - 1
            branches.append(f"{digits[:at]}[0-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    return "(?:" + "|".join([*branches, digits]) + ")"


# The versions ``expected_version`` takes, published so a generated client checks them before sending.
IF_MATCH_PATTERN = rf'^(?:\*|(?:W/)?"?{_decimal_at_most(MAX_SEQ)}"?)$'
IfMatch = Annotated[
    str | None,
    Header(description='The claim version the write is based on, e.g. "42" (the page\'s ETag).'),
    WithJsonSchema({"type": "string", "pattern": IF_MATCH_PATTERN}),
]
Authenticated = Annotated[Actor, Depends(allowed_actor)]


def _typed_route(name: str, model: type[Command]) -> None:
    async def endpoint(
        request: Request,
        body: Command,  # replaced below by the command's own model, for validation and OpenAPI
        actor: Authenticated,
        idempotency_key: IdempotencyKey = None,
        if_match: IfMatch = None,
    ) -> JSONResponse:
        return await run(request, body, actor, idempotency_key, if_match)

    endpoint.__name__ = name
    endpoint.__annotations__["body"] = Annotated[model, Body()]
    router.add_api_route(
        f"/commands/{name}",
        endpoint,
        methods=["POST"],
        status_code=201,
        response_model=CommandResult,
        responses=RESPONSES,
        summary=name.replace("_", " ").capitalize(),
        description=model.__doc__,
    )


for _name, _model in COMMAND_TYPES.items():
    _typed_route(_name, _model)


@router.post("/commands", status_code=201, response_model=CommandResult, responses=RESPONSES)
async def any_command(
    request: Request,
    body: Annotated[AnyCommand, Body()],
    actor: Authenticated,
    idempotency_key: IdempotencyKey = None,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Any command, named by its ``command`` field (the same JSON a JSON Lines file for ``claimlog ingest`` holds)."""
    return await run(request, body, actor, idempotency_key, if_match)
