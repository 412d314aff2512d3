"""The API process: the app, and for commands a writer's connection to the log for the app's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import Engine

from services.read_api.app import attach_log, create_app
from services.runtime import open_log
from services.settings import Settings


def build_app(settings: Settings, engine: Engine, *, commands: bool = True) -> FastAPI:
    """The API as ``claimlog api`` serves it: connected to the log as the writer, or (read-only) as a reader."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        role = "writer" if commands else "reader"
        async with open_log(settings, client_name="claimlog-api", role=role) as claim_log:
            attach_log(app, claim_log)
            yield

    return create_app(engine, commands=commands, lifespan=lifespan, read_wait=settings.read_wait_seconds)
