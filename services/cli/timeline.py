"""``claimlog show`` and ``claimlog history``: a claim page as of any moment, and its history with diffs, in the terminal."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from sqlalchemy.exc import DBAPIError

from events import EVENT_TYPES, ActorKind
from services.admission import gate_for
from services.cli.errors import claim_key, no_claim
from services.cli.page_view import render_page, who
from services.cli.setup import command_settings
from services.runtime.db import DatabaseNotReadyError
from services.runtime.from_settings import open_log, run
from services.runtime.settings import Settings
from services.timeline.as_of import AsOf, BadAsOf, is_claim_id, page_json_as_of, parse_as_of
from services.timeline.history import Entry, claim_history, select_entries

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``show`` and ``history`` to the ``claimlog`` command."""
    app.command("show")(show)
    app.command("history")(history)


def show(
    claim: Annotated[str, typer.Argument(help="Claim id (CLM-0338) or slug.")],
    as_of: Annotated[str | None, typer.Option("--as-of", help="As it stood at this time (ISO 8601 with a zone).")] = None,
    as_of_seq: Annotated[int | None, typer.Option("--as-of-seq", help="As it stood at this log sequence.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the page's JSON, as GET /claims/{id} answers it.")] = False,
) -> None:
    """A claim page, folded from the log; with --as-of or --as-of-seq, as it stood then."""
    try:
        point = parse_as_of(None if as_of_seq is None else str(as_of_seq), as_of)
    except BadAsOf as error:
        raise typer.BadParameter(str(error).replace("as_of_seq", "--as-of-seq").replace("as_of", "--as-of")) from None
    doc = run(_page_json(command_settings(), claim_key(claim), point))
    if doc is None:
        console.print(f"[red]{escape(no_claim(claim, point))}[/red]")
        raise typer.Exit(1)
    if as_json:
        print(doc.decode())
    else:
        Console().print(render_page(json.loads(doc)))


def history(
    claim: Annotated[str, typer.Argument(help="Claim id (CLM-0338) or slug.")],
    type_: Annotated[list[str] | None, typer.Option("--type", help="Only events of this type (repeatable).")] = None,
    actor_kind: Annotated[ActorKind | None, typer.Option(help="Only events by a person, a model or a service.")] = None,
    after_seq: Annotated[int, typer.Option(min=0, help="Only events after this log sequence.")] = 0,
    limit: Annotated[int, typer.Option(min=1, help="At most this many events.")] = 1000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the events as JSON.")] = False,
) -> None:
    """Every event of a claim in log order, who acted, and what each revision or correction changed."""
    unknown = sorted(set(type_ or []) - set(EVENT_TYPES))
    if unknown:
        raise typer.BadParameter(f"no event type {', '.join(unknown)}; types are {', '.join(EVENT_TYPES)}")
    entries = run(_history(command_settings(), claim_key(claim)))
    if entries is None:
        console.print(f"[red]{escape(no_claim(claim))}[/red]")
        raise typer.Exit(1)
    kind = actor_kind.value if actor_kind else None
    shown, _ = select_entries(entries, types=set(type_ or []), actor_kind=kind, after_seq=after_seq, limit=limit)
    if as_json:
        print(json.dumps([_entry_json(e) for e in shown], indent=2, default=str))
    else:
        Console().print(history_table(claim, shown))


def _claim_id(settings: Settings, key: str) -> str | None:
    if is_claim_id(key):
        return key
    from services.read_api.as_of_pages import claim_of_slug
    from services.store.generations import Generations

    with Generations(settings.resolved_database_url()).active()[1].connect() as conn:
        return claim_of_slug(conn, key)


async def _page_json(settings: Settings, key: str, point: AsOf | None) -> bytes | None:
    from services.read_api.as_of_pages import shaped_page
    from services.store.generations import Generations

    claim_id = _claim_id(settings, key)
    if claim_id is None:
        return None
    async with open_log(settings, client_name="claimlog-show", role="reader") as claim_log:
        doc = await page_json_as_of(claim_log, claim_id, point)
    if doc is None:
        return None
    try:  # the read models only resolve related claims to their pages; the page itself is the log's
        with Generations(settings.resolved_database_url()).active()[1].connect() as conn:
            return shaped_page(conn, doc.decode(), point or AsOf())
    except (DatabaseNotReadyError, DBAPIError):
        return doc


async def _history(settings: Settings, key: str) -> list[Entry] | None:
    claim_id = _claim_id(settings, key)
    if claim_id is None:
        return None
    async with open_log(settings, client_name="claimlog-history", role="reader") as claim_log:
        stored = await claim_log.read_claim(claim_id)
        gate = await gate_for(claim_log, (item.signature for item in stored))
    return claim_history(claim_id, stored, gate=gate)


def _entry_json(entry: Entry) -> dict[str, Any]:
    body = dict(vars(entry))
    body["actor"] = entry.actor.model_dump(mode="json") if entry.actor else None
    body["diff"] = [vars(c) for c in entry.diff] if entry.diff is not None else None
    return body


def history_table(claim: str, entries: list[Entry]) -> Table:
    """The history as a table: one row per event, its changes one per line."""
    table = Table("seq", "stored", "type", "actor", "rev", "changes", title=f"History of {claim}", title_justify="left")
    for e in entries:
        actor = who(e.actor.model_dump(mode="json")) if e.actor else ""
        changes = Text("\n").join(_change(c.field, c.before, c.after) for c in e.diff or [])
        if e.unreadable:
            changes = Text(f"unreadable: {e.unreadable}", style="red")
        stored = e.stored_at.isoformat(timespec="seconds")
        table.add_row(str(e.seq), stored, e.type, actor, str(e.revision or ""), changes)
    return table


def _change(field: str, before: Any, after: Any) -> Text:
    """One field's change: short values whole, texts as the words removed (red, struck) and added (green)."""
    line = Text(f"{field}: ", style="bold")
    if not (isinstance(before, str) and isinstance(after, str)) or max(len(before), len(after)) <= 60:
        return line.append(f"{before!r} → {after!r}")
    old, new = before.split(), after.split()
    for tag, i1, i2, j1, j2 in SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            kept = old[i1:i2]
            line.append(" ".join(kept) if len(kept) <= 8 else f"{' '.join(kept[:3])} … {' '.join(kept[-3:])}")
        else:
            if i2 > i1:
                line.append(" ".join(old[i1:i2]), style="red strike")
            if j2 > j1:
                line.append(" " if i2 > i1 else "").append(" ".join(new[j1:j2]), style="green")
        line.append(" ")
    return line
