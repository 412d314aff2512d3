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
    """The API as ``claimlog api`` serves it."""
    if not commands:
        return create_app(engine, read_wait=settings.read_wait_seconds)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_log(settings, client_name="claimlog-api", role="writer") as claim_log:
            attach_log(app, claim_log)
            yield

    return create_app(engine, commands=True, lifespan=lifespan, read_wait=settings.read_wait_seconds)
