"""Alembic migrations of the read-model schema (reviewed revisions in versions/)."""
