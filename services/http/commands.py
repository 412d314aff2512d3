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
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field, WithJsonSchema

from events import Actor
from services.commands.decide import Kind, Rejected
from services.commands.models import (
    COMMAND_TYPES,
    AnyCommand,
    Command,
    DuplicateKeyError,
    refuse_duplicate_keys,
)
from services.commands.service import Outcome
from services.identity.actors import ActorsUnavailable, TokenExpired
from services.log import MAX_SEQ, LogError
from services.read_api.api_state import Api, api_state
from services.read_api.errors import InvalidRequestBody
from services.read_api.sequences import decimal_at_most

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
    entry_index: int = Field(description="Its entry in the transparency log (seq - 1; seq in a log that succeeds another, whose entry 0 names "
        "its predecessor): GET /log/proof/{entry_index} proves it once integrated.")


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


RETRY_AFTER = {"Retry-After": {"description": "Whole seconds to wait before retrying.", "schema": {"type": "integer"}}}
# Each refusal a command can get, by status: ``error`` is the reason (docs/api.md, docs/commands.md).
REFUSALS: dict[int, str] = {
    400: "`bad_if_match`: an If-Match that names no claim version; `http_error`: a body that is not JSON text.",
    401: "`unauthorized`: no bearer token, or an unknown or revoked one; `token_expired`: a token past its expiry.",
    403: "A rule's refusal: the actor may not do this (e.g. review its own claim).",
    404: "A rule's refusal: the claim, or what the command names on it, does not exist.",
    409: "`stale_version`: If-Match names an older version; `write_conflict` (retry); or a rule's refusal of the "
    "claim's state.",
    413: "`payload_too_large`: the body passed `CLAIMLOG_MAX_BODY_BYTES`; nothing was parsed.",
    422: "`invalid_request`: the body does not validate (`problems` say where); `duplicate_key`: a field named twice; "
    "`idempotency_key_reused`: the Idempotency-Key (or event_id) was used for another command or body; or a rule's refusal.",
    429: "`rate_limited`: the actor's writes are used up for now; retry after `Retry-After`.",
    503: "`log_unavailable`: the log did not take the command (retry); nothing was published.",
}
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": InvalidRequestBody if status == 422 else CommandError, "description": description}
    | ({"headers": RETRY_AFTER} if status in (429, 503) else {})
    for status, description in REFUSALS.items()
}
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": CommandResult, "description": "A retry of a command already carried out (`duplicate: true`)."},
    **ERRORS,
}


def unauthorized(message: str, error: str = "unauthorized") -> HTTPException:
    return HTTPException(
        401, detail={"error": error, "message": message}, headers={"WWW-Authenticate": 'Bearer realm="claimlog"'}
    )


# Declared in the OpenAPI document as the security of every write, so a generated client can authenticate.
# ``auto_error=False``: a missing or malformed token is answered below, with the API's own error body.
BEARER = HTTPBearer(
    scheme_name="bearerAuth",
    description="An actor's token (`claimlog actors add`): `Authorization: Bearer <token>`. The event's actor is its owner.",
    auto_error=False,
)


async def current_actor(
    api: Api, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)] = None
) -> Actor:
    """The actor whose bearer token came with the request; 401 for none, unknown or revoked (``token_expired``
    for one past its expiry)."""
    if credentials is None:
        raise unauthorized("writes need a bearer token: Authorization: Bearer <token> (see `claimlog actors add`)")
    try:
        store = await api.write_side.actor_store()
    except ActorsUnavailable as error:
        raise unauthorized(str(error)) from None
    try:
        actor = await store.authenticate(credentials.credentials.strip())
    except TokenExpired as expired:
        raise unauthorized(str(expired), error="token_expired") from None
    if actor is None:
        raise unauthorized("the bearer token is unknown or revoked")
    return actor


async def allowed_actor(api: Api, actor: Annotated[Actor, Depends(current_actor)]) -> Actor:
    """The authenticated actor, if it has writes left (``services/identity/rate_limit.py``); 429 if not."""
    limiter = api.write_side.rate_limiter
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
    service = api_state(request.app).write_side.commands
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
    published = api_state(request.app).published_log()
    return _result(outcome, [await published.entry_index(e.seq) if published else e.seq - 1 for e in outcome.events])


def _result(outcome: Outcome, entry_indexes: list[int]) -> JSONResponse:
    refs = [
        StoredEventRef(event_id=e.event_id, type=e.type, seq=e.seq, entry_index=index)
        for e, index in zip(outcome.events, entry_indexes, strict=True)
    ]
    body = CommandResult(
        claim_id=outcome.claim_id,
        command=outcome.command,
        duplicate=outcome.duplicate,
        events=refs,
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


# The versions ``expected_version`` takes, published so a generated client checks them before sending.
IF_MATCH_PATTERN = rf'^(?:\*|(?:W/)?"?{decimal_at_most(MAX_SEQ)}"?)$'
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
