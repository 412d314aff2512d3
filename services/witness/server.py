"""The witness's HTTP server: ``POST /add-checkpoint`` and ``GET /<origin hash>/checkpoint`` (tlog-witness v1.0.0).

A checkpoint is answered with one cosignature line per key of the witness (tlog-witness allows one or more),
all made at the same time, and held with them all.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from services.witness.rules import Refusal, check, parse
from services.witness.state import WitnessState
from tlog.cosignature import Cosigner, MLDSA44Cosigner
from tlog.note import Verifier
from tlog.witness_protocol import SIZE_TYPE, format_signatures

MAX_BODY = 64 * 1024  # a checkpoint, 63 proof lines and signatures: far less


def create_witness_app(
    cosigners: Sequence[Cosigner | MLDSA44Cosigner], logs: Mapping[str, Sequence[Verifier]], state: WitnessState, *,
    clock: Callable[[], float] = time.time,
) -> FastAPI:
    """The witness of the logs ``logs`` (origin -> the log's verifier keys), cosigning with each of ``cosigners``."""
    app = FastAPI(title="claimlog witness", docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/add-checkpoint")
    async def add_checkpoint(request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY:
            return PlainTextResponse(f"a request of at most {MAX_BODY} bytes\n", status_code=413)
        signed: list = []

        def cosign(held):
            checkpoint = check(submitted, logs.get(submitted.checkpoint.origin), held)
            at = int(clock())
            signed[:] = [cosigner.cosign(checkpoint.text(), at) for cosigner in cosigners]
            return checkpoint, submitted.request.checkpoint + format_signatures(signed)

        try:
            submitted = parse(body)
            state.atomically(submitted.checkpoint.origin, cosign)
        except Refusal as refusal:
            if refusal.evidence is not None:
                state.keep_evidence(submitted.checkpoint.origin, submitted.request.checkpoint, refusal.message)
            if refusal.status == 409:
                return Response(refusal.message, status_code=409, media_type=SIZE_TYPE)
            return PlainTextResponse(refusal.message + "\n", status_code=refusal.status)
        return PlainTextResponse(format_signatures(signed))

    @app.get("/{origin_hash}/checkpoint")
    async def held_checkpoint(origin_hash: str) -> Response:
        for origin in logs:
            if hashlib.sha256(origin.encode()).hexdigest() == origin_hash:
                found = state.held(origin)
                if found is not None:
                    return PlainTextResponse(found[1])
        return PlainTextResponse("this witness has cosigned no checkpoint of that log\n", status_code=404)

    return app
