"""Alembic environment: runs on the engine claimlog passes in (``config.attributes['engine']``)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from projections.tables import alembic_filters, metadata

config = context.config


def run_migrations_online() -> None:
    """Run migrations on claimlog's engine, or on sqlalchemy.url when Alembic is called directly."""
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            # SQLite's FTS5 search table and PostgreSQL's GIN search index: see projections/tables.py.
            **alembic_filters(connection.dialect.name),
        )
        context.run_migrations()


run_migrations_online()
