"""The API process: the app, and for commands a writer's connection to the log for the app's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import Engine

from services.http.app import attach_log, create_app
from services.read_api.api_state import api_state
from services.read_api.browser import Cors
from services.read_api.guards import Guards
from services.runtime.from_settings import open_log
from services.runtime.settings import Settings
from services.store.generations import Generations

log = logging.getLogger(__name__)
FOLLOW_EVERY = 0.5  # seconds between looks at which read-model generation is active


def build_app(settings: Settings, generations: Generations, *, commands: bool = True) -> FastAPI:
    """The API as ``claimlog api`` serves it: on the active read-model generation (following a switch),
    connected to the log as the writer, or (read-only) as a reader."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        role = "writer" if commands else "reader"
        follower = asyncio.create_task(follow_generations(app, generations))
        try:
            async with open_log(settings, client_name="claimlog-api", role=role) as claim_log:
                attach_log(app, claim_log)
                yield
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    number, engine = generations.active()
    app = create_app(
        engine,
        commands=commands,
        lifespan=lifespan,
        read_wait=settings.read_wait_seconds,
        guards=Guards.from_settings(settings),
        cors=Cors.from_settings(settings),
    )
    api_state(app).reads.generation = number
    return app


async def follow_generations(app: FastAPI, generations: Generations, *, every: float = FOLLOW_EVERY) -> None:
    """Serve whichever generation is active: a request takes the app's engine once, so it reads either
    the old tables or the new ones, never a mix; requests already running finish on the old engine."""
    while True:
        await asyncio.sleep(every)
        try:
            number = await asyncio.to_thread(generations.active_number)
        except Exception as error:  # noqa: BLE001 - the home database restarting must not stop the follower
            log.warning("cannot read the active read-model generation: %s", error)
            continue
        state = api_state(app)
        if number != state.reads.generation:
            engine: Engine = generations.engine(number)
            state.reads.engine, state.reads.generation = engine, number
            state.reads.applied = 0  # read-your-writes positions are per generation
            log.warning("serving read-model generation %s", number)
