"""``claimlog db upgrade`` and ``claimlog unreadable``: the read-model database, and the events it could not read."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from services.cli.setup import console, setup

db_app = typer.Typer(help="The read-model database.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add ``unreadable`` and the ``db`` group to the ``claimlog`` command."""
    app.command("unreadable")(unreadable)
    app.add_typer(db_app, name="db")


def unreadable(
    after: Annotated[int, typer.Option(min=0, help="Only events after this log sequence (0: from the first).")] = 0,
    limit: Annotated[int, typer.Option(min=1, help="At most this many.")] = 100,
) -> None:
    """Events in the log the projections could not read (skipped, with the reason); exits 1 when there are any."""
    from rich.table import Table

    from services.read_api.queries import unreadable as unreadable_rows
    from services.runtime.db import make_engine

    settings = setup("WARNING")
    engine = make_engine(settings.resolved_database_url(), create=False)
    with engine.connect() as conn:
        rows = unreadable_rows(conn, after=after, limit=limit)
    table = Table("seq", "subject", "reason", title=f"{len(rows)} unreadable event(s)")
    for row in rows:
        table.add_row(str(row["seq"]), row["subject"], row["reason"])
    Console().print(table)
    raise typer.Exit(1 if rows else 0)


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Migrate the read-model schema (Alembic)."""
    from services.runtime.db import upgrade
    from services.store.generations import Generations

    settings = setup()
    generations = Generations(settings.resolved_database_url())
    if revision == "head":
        migrated = generations.upgrade()
    else:
        from alembic.util import CommandError

        try:
            upgrade(generations.home, revision)
        except CommandError as error:
            raise typer.BadParameter(
                f"{error} in claimlog's migrations: leave it out to migrate to the newest (claimlog db upgrade), or name "
                "a revision of migrations/versions/ (e.g. claimlog db upgrade 0003)", param_hint="REVISION") from None
        migrated = [0]
    where = generations.home.url.render_as_string(hide_password=True)
    console.print(f"database at {where} is at revision {revision} (read-model generations {migrated})")
