"""The read API: claim pages, listings and health, served from the read models."""

from services.read_api.app import create_app

__all__ = ["create_app"]
