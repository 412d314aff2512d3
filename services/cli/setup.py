"""What every ``claimlog`` command does first: logging to the terminal, then the settings it runs with.

The command line's composition root: a command reads its settings here, once, and passes them down;
nothing below it builds its own (``tests/unit/test_composition.py`` checks it)."""

from __future__ import annotations

import logging
from contextvars import ContextVar

from rich.console import Console
from rich.logging import RichHandler

from services.runtime.settings import Settings

console = Console(stderr=True)
_in_use: ContextVar[Settings | None] = ContextVar("claimlog_settings", default=None)


def setup(level: str = "INFO") -> Settings:
    """Log to stderr at ``level`` (Alembic and httpx only from WARNING) and read the settings."""
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(console=console, show_path=False)])
    for chatty in ("alembic", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    return command_settings()


def command_settings() -> Settings:
    """Read the settings a command runs with, once, at its start: the command hands them down to what it
    runs, and ``settings_in_use`` gives them to the error message it may end with."""
    settings = Settings()
    _in_use.set(settings)
    return settings


def settings_in_use() -> Settings | None:
    """The settings the running command read (None before it read them)."""
    return _in_use.get()
