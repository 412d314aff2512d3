"""What every ``claimlog`` command does first: logging to the terminal, then the settings it runs with."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.logging import RichHandler

from services.runtime.settings import Settings

console = Console(stderr=True)


def setup(level: str = "INFO") -> Settings:
    """Log to stderr at ``level`` (Alembic and httpx only from WARNING) and read the settings."""
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(console=console, show_path=False)])
    for chatty in ("alembic", "httpx"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    return Settings()
