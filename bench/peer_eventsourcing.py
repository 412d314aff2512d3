"""The peer of the replay benchmark: the Python ``eventsourcing`` library on claimlog's workload.

    python bench/peer_eventsourcing.py [--claims 2000] [--per-claim 10] [--postgres URL]

``run_peer(events, database=...)`` takes claimlog events (in log order) and a target, a SQLite file
path or a PostgreSQL URL (a fresh database is created for the run and dropped afterwards), and runs
two phases, each in a fresh process so that its peak memory (VmHWM) is its own:

- store: an ``eventsourcing`` Application (``Claims``) with one ``Claim`` aggregate per claim id
  (uuid5 of the claim id). Each claimlog event becomes one domain event of its claim's aggregate
  (``Claim.Opened`` for the claim's first event, ``Claim.Recorded`` after it), carrying the event's
  type and its ``model_dump(mode="json")`` payload. A claim's events are saved with one
  ``Application.save(claim)`` (one transaction, several events per save): the natural unit of an
  aggregate, and kind to the library. Persistence is the library's own module, chosen by
  ``PERSISTENCE_MODULE=eventsourcing.sqlite`` / ``eventsourcing.postgres`` and its settings.
- project: the library's ``ProjectionRunner`` with a ``Projection`` subclass and a tracking-recorder
  view (``SQLiteTrackingRecorder`` / ``PostgresTrackingRecorder`` subclasses, same database) that
  folds the stored events into the counts a claim page shows (``projections.page_model.Counts``),
  each event in its own transaction with its tracking record, as the library does. Timed from the
  runner's construction until the view's max tracking id reaches the last notification id.

Then the view's counts are checked against claimlog's own fold (``projections.claim_page.fold``)
for a sample of claims (all of them up to ``sample``); a difference raises.

eventsourcing 9.5.6's SQLite application recorder does not support subscriptions (``subscribe()``
raises NotImplementedError), so for SQLite the application uses ``PollingSQLiteApplicationRecorder``:
the library's own ``ListenNotifySubscription`` (pull in batches of 500 into a queue), woken by a
50 ms timer instead of LISTEN/NOTIFY. With the whole log stored before the runner starts, the
timer only matters at the very end.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from eventsourcing.application import Application  # noqa: E402
from eventsourcing.dispatch import singledispatchmethod  # noqa: E402
from eventsourcing.domain import Aggregate, event  # noqa: E402
from eventsourcing.persistence import (  # noqa: E402
    ApplicationRecorder,
    ListenNotifySubscription,
    Subscription,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.projection import Projection, ProjectionRunner  # noqa: E402
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteTrackingRecorder  # noqa: E402
from eventsourcing.utils import get_topic  # noqa: E402

RELATIONS = ("validates", "supports", "contradicts", "qualifies", "mentions")  # events.source.RELATIONS
COUNT_COLUMNS = (*RELATIONS, "sources_withdrawn", "disagreements_open", "disagreements_resolved", "reviews_person", "reviews_ai")
CLAIM_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://claimlog/claims")
POLL_SECONDS = 0.02  # how often the timed loop looks at the view's tracking position


# -- the write side -----------------------------------------------------------------------------


def claim_uuid(claim_id: str) -> UUID:
    """The aggregate id of a claim: deterministic, so a claim's events always go to one aggregate."""
    return uuid.uuid5(CLAIM_NAMESPACE, claim_id)


class Claim(Aggregate):
    """One research claim; every claimlog event of the claim is one domain event of this aggregate."""

    class Opened(Aggregate.Created):
        claim_id: str
        type: str
        payload: dict

    class Recorded(Aggregate.Event):
        type: str
        payload: dict

    @staticmethod
    def create_id(claim_id: str) -> UUID:
        return claim_uuid(claim_id)

    @event(Opened)
    def __init__(self, claim_id: str, type: str, payload: dict) -> None:  # noqa: A002 - the event's field
        self.claim_id = claim_id
        self.facts = 1

    @event(Recorded)
    def record(self, type: str, payload: dict) -> None:  # noqa: A002 - the event's field
        self.facts += 1


class Claims(Application[UUID]):
    """The write model: claims as aggregates, stored by the library's persistence module."""


class PollingSQLiteSubscription(ListenNotifySubscription[SQLiteApplicationRecorder]):
    """The library's pull-and-queue subscription, woken by a timer (SQLite has no LISTEN/NOTIFY)."""

    def __init__(self, recorder: SQLiteApplicationRecorder, gt: int | None = None, topics: Sequence[str] = (), interval: float = 0.05) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        self._interval = interval
        self._timer = threading.Thread(target=self._tick, daemon=True)
        self._timer.start()

    def _tick(self) -> None:
        while not self._has_been_stopped:
            time.sleep(self._interval)
            self._has_been_notified.set()

    def __exit__(self, *args: object, **kwargs: Any) -> None:
        try:
            super().__exit__(*args, **kwargs)
        finally:
            self._timer.join()


class PollingSQLiteApplicationRecorder(SQLiteApplicationRecorder):
    """The library's SQLite application recorder, plus the subscription its 9.5.6 release lacks."""

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> Subscription[ApplicationRecorder]:
        return PollingSQLiteSubscription(self, gt=gt, topics=topics)


# -- the read side: a view of per-claim counts ---------------------------------------------------


class ClaimCountsView(TrackingRecorder, ABC):
    """Per-claim counts (as ``projections.page_model.Counts``), each change recorded with its tracking.

    ``claim_counts`` holds the counts; ``claim_items`` holds what the counts need to stay right when a
    source or review is withdrawn or a source's relation is corrected (its relation or reviewer kind,
    and whether it is still active/open). Events of a claim not yet drafted change nothing, and a
    repeated id is ignored, as in claimlog's fold.
    """

    @abstractmethod
    @contextmanager
    def _step(self, tracking: Tracking) -> Iterator[Any]:
        """A transaction that records ``tracking`` when the block succeeds."""

    @abstractmethod
    def _one(self, c: Any, statement: str, params: tuple) -> Any:
        """Execute a statement written with ``?`` placeholders; the first row or None."""

    def table_statements(self) -> list[str]:
        counts = ", ".join(f"{name} INTEGER NOT NULL DEFAULT 0" for name in COUNT_COLUMNS)
        return [
            f"CREATE TABLE IF NOT EXISTS claim_counts (claim_id TEXT PRIMARY KEY, {counts})",
            "CREATE TABLE IF NOT EXISTS claim_items (claim_id TEXT NOT NULL, kind TEXT NOT NULL, item_id TEXT NOT NULL, "
            "detail TEXT, active INTEGER NOT NULL, PRIMARY KEY (claim_id, kind, item_id))",
        ]

    # Steps, one per kind of change. Each runs in one transaction with its tracking record.

    def claim_drafted(self, claim_id: str, tracking: Tracking) -> None:
        with self._step(tracking) as c:
            self._one(c, "INSERT INTO claim_counts (claim_id) VALUES (?) ON CONFLICT DO NOTHING", (claim_id,))

    def item_added(self, claim_id: str, kind: str, item_id: str, detail: str, column: str, tracking: Tracking) -> None:
        """A source, disagreement or review appears (if the claim is drafted and the id is new)."""
        with self._step(tracking) as c:
            if self._drafted(c, claim_id) and self._item(c, claim_id, kind, item_id) is None:
                self._one(c, "INSERT INTO claim_items VALUES (?, ?, ?, ?, 1)", (claim_id, kind, item_id, detail))
                self._add(c, claim_id, {column: 1})

    def item_ended(self, claim_id: str, kind: str, item_id: str, tracking: Tracking) -> None:
        """A source or review is withdrawn, a disagreement resolved (if it is still active/open)."""
        with self._step(tracking) as c:
            found = self._item(c, claim_id, kind, item_id)
            if found is not None and found["active"]:
                self._one(c, "UPDATE claim_items SET active = 0 WHERE claim_id = ? AND kind = ? AND item_id = ?", (claim_id, kind, item_id))
                self._add(c, claim_id, ENDED[kind](found["detail"]))

    def source_corrected(self, claim_id: str, source_id: str, relation: str | None, tracking: Tracking) -> None:
        with self._step(tracking) as c:
            found = self._item(c, claim_id, "source", source_id)
            if found is not None and relation is not None and relation != found["detail"]:
                self._one(c, "UPDATE claim_items SET detail = ? WHERE claim_id = ? AND kind = 'source' AND item_id = ?", (relation, claim_id, source_id))
                if found["active"]:
                    self._add(c, claim_id, {_relation(found["detail"]): -1, _relation(relation): 1})

    def _drafted(self, c: Any, claim_id: str) -> bool:
        return self._one(c, "SELECT 1 AS drafted FROM claim_counts WHERE claim_id = ?", (claim_id,)) is not None

    def _item(self, c: Any, claim_id: str, kind: str, item_id: str) -> Any:
        return self._one(c, "SELECT detail, active FROM claim_items WHERE claim_id = ? AND kind = ? AND item_id = ?", (claim_id, kind, item_id))

    def _add(self, c: Any, claim_id: str, changes: dict[str, int]) -> None:
        assignments = ", ".join(f"{column} = {column} + ?" for column in changes)  # columns come from COUNT_COLUMNS
        self._one(c, f"UPDATE claim_counts SET {assignments} WHERE claim_id = ?", (*changes.values(), claim_id))

    def all_counts(self) -> dict[str, dict]:
        """Every drafted claim's counts, in the shape of ``dataclasses.asdict(Counts)``."""
        rows = self._all(f"SELECT claim_id, {', '.join(COUNT_COLUMNS)} FROM claim_counts")
        return {row["claim_id"]: _counts_from_row(row) for row in rows}

    @abstractmethod
    def _all(self, statement: str) -> list[Any]:
        """All rows of a query, outside any step."""


def _relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}")
    return relation


ENDED = {
    "source": lambda relation: {_relation(relation): -1, "sources_withdrawn": 1},
    "disagreement": lambda _: {"disagreements_open": -1, "disagreements_resolved": 1},
    "review": lambda reviewer_kind: {"reviews_person" if reviewer_kind == "person" else "reviews_ai": -1},
}


def _counts_from_row(row: Any) -> dict:
    by_relation = {relation: row[relation] for relation in RELATIONS}
    return {
        "sources_by_relation": by_relation,
        "sources_active": sum(by_relation.values()),
        **{name: row[name] for name in COUNT_COLUMNS if name not in RELATIONS},
    }


class SQLiteClaimCountsView(ClaimCountsView, SQLiteTrackingRecorder):
    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), *self.table_statements()]

    @contextmanager
    def _step(self, tracking: Tracking) -> Iterator[Any]:
        with self.datastore.transaction(commit=True) as c:
            yield c
            self._insert_tracking(c, tracking)

    def _one(self, c: Any, statement: str, params: tuple) -> Any:
        c.execute(statement, params)
        return c.fetchone()

    def _all(self, statement: str) -> list[Any]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement)
            return c.fetchall()


def postgres_view_class() -> type[ClaimCountsView]:
    """The PostgreSQL view (imported lazily: ``eventsourcing.postgres`` needs psycopg-pool, SQLite does not)."""
    from eventsourcing.postgres import PostgresTrackingRecorder
    from psycopg.sql import SQL

    class PostgresClaimCountsView(ClaimCountsView, PostgresTrackingRecorder):
        def __init__(self, datastore: Any, **kwargs: Any) -> None:
            super().__init__(datastore, **kwargs)
            self.sql_create_statements.extend(SQL(statement) for statement in self.table_statements())  # type: ignore[arg-type]

        @contextmanager
        def _step(self, tracking: Tracking) -> Iterator[Any]:
            with self.datastore.transaction(commit=True) as c:
                yield c
                self._insert_tracking(c, tracking)

        def _one(self, c: Any, statement: str, params: tuple) -> Any:
            c.execute(statement.replace("?", "%s"), params, prepare=True)
            return c.fetchone() if c.description else None

        def _all(self, statement: str) -> list[Any]:
            with self.datastore.transaction(commit=False) as c:
                c.execute(statement)
                return c.fetchall()

    return PostgresClaimCountsView


class ClaimCountsProjection(Projection[ClaimCountsView]):
    """Folds each stored claimlog event into its claim's counts (claimlog's ``derive`` semantics)."""

    name = "claimcounts"
    topics = (get_topic(Claim.Opened), get_topic(Claim.Recorded))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        self.view.insert_tracking(tracking)

    @process_event.register(Claim.Opened)
    @process_event.register(Claim.Recorded)
    def _claimlog_event(self, domain_event: Claim.Opened | Claim.Recorded, tracking: Tracking) -> None:
        p, view = domain_event.payload, self.view
        claim_id, kind = p["claim_id"], domain_event.type
        if kind == "ClaimDrafted":
            view.claim_drafted(claim_id, tracking)
        elif kind == "SourceAttached":
            view.item_added(claim_id, "source", p["source_id"], p["relation"], _relation(p["relation"]), tracking)
        elif kind == "SourceCorrected":
            view.source_corrected(claim_id, p["source_id"], p.get("relation"), tracking)
        elif kind == "SourceWithdrawn":
            view.item_ended(claim_id, "source", p["source_id"], tracking)
        elif kind == "DisagreementFiled":
            view.item_added(claim_id, "disagreement", p["disagreement_id"], "", "disagreements_open", tracking)
        elif kind == "DisagreementResolved":
            view.item_ended(claim_id, "disagreement", p["disagreement_id"], tracking)
        elif kind == "ReviewRecorded":
            column = "reviews_person" if p["reviewer_kind"] == "person" else "reviews_ai"
            view.item_added(claim_id, "review", p["review_id"], p["reviewer_kind"], column, tracking)
        elif kind == "ReviewWithdrawn":
            view.item_ended(claim_id, "review", p["review_id"], tracking)
        else:  # revisions, answers, relations between claims: no count changes
            view.insert_tracking(tracking)


# -- the two phases, each run in a fresh process -------------------------------------------------


def _peak_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _store(log_path: str) -> dict:
    """Save each claim's events (one JSON line per claim) as one aggregate, one save per claim."""
    app = Claims()
    stored, busy, last_id = 0, 0.0, None
    with open(log_path) as log:
        for line in log:
            claim_id, payloads = json.loads(line)
            started = time.perf_counter()
            claim = Claim(claim_id=claim_id, type=payloads[0]["type"], payload=payloads[0])
            for payload in payloads[1:]:
                claim.record(type=payload["type"], payload=payload)
            recordings = app.save(claim)
            busy += time.perf_counter() - started
            stored += len(recordings)
            last_id = recordings[-1].notification.id
    head = app.recorder.max_notification_id()
    app.close()
    return {"events": stored, "seconds": busy, "last_id": head, "saved_last_id": last_id, "peak_mb": _peak_mb()}


def _project(view_class_name: str, last_id: int, counts_path: str, timeout: float) -> dict:
    """Run the library's projection runner until the view has tracked ``last_id``; write the counts."""
    view_class = SQLiteClaimCountsView if view_class_name == "sqlite" else postgres_view_class()
    started = time.perf_counter()
    progress_at, position = started, 0
    with ProjectionRunner(application_class=Claims, projection_class=ClaimCountsProjection, view_class=view_class) as runner:
        while True:
            now_at = runner.view.max_tracking_id(runner.app_name) or 0
            if now_at >= last_id:
                break
            if runner.is_interrupted.is_set():
                runner.run_forever(timeout=0)  # re-raises the processing thread's error
                raise RuntimeError("the projection runner stopped before the end of the log")
            if now_at > position:
                position, progress_at = now_at, time.perf_counter()
            elif time.perf_counter() - progress_at > timeout:
                raise TimeoutError(f"the view stalled at notification {position} of {last_id}")
            time.sleep(POLL_SECONDS)
        seconds = time.perf_counter() - started
        peak = _peak_mb()
        Path(counts_path).write_text(json.dumps(runner.view.all_counts()))
    return {"seconds": seconds, "peak_mb": peak}


def _child(argv: list[str]) -> None:
    result = _store(argv[1]) if argv[0] == "store" else _project(argv[1], int(argv[2]), argv[3], float(argv[4]))
    print(json.dumps(result))


def _run_child(args: list[str], env: dict[str, str]) -> dict:
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench.peer_eventsourcing import _child; _child(sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ, **env}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the peer's {args[0]} phase failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- targets -------------------------------------------------------------------------------------


def _is_postgres(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


@contextmanager
def _target(database: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The view kind and the library's settings for ``database``; a fresh PostgreSQL database, dropped after."""
    if not _is_postgres(database):
        path = Path(database.removeprefix("sqlite:///"))
        if path.exists():
            raise FileExistsError(f"{path} exists: the peer needs a fresh SQLite file")
        yield "sqlite", {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(path),
            "SQLITE_LOCK_TIMEOUT": "30",
            # The children import this module by name, even when the parent runs it as a script.
            "APPLICATION_RECORDER_TOPIC": f"bench.peer_eventsourcing:{PollingSQLiteApplicationRecorder.__qualname__}",
        }
        return
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    url = database.replace("postgresql+psycopg://", "postgresql://")
    info = conninfo_to_dict(url)
    name = f"peer_eventsourcing_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield "postgres", {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": name,
            "POSTGRES_HOST": str(info.get("host") or "127.0.0.1"),
            "POSTGRES_PORT": str(info.get("port") or 5432),
            "POSTGRES_USER": str(info.get("user") or "postgres"),
            "POSTGRES_PASSWORD": str(info.get("password") or ""),
        }
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the check against claimlog's fold -----------------------------------------------------------


def _check(events: Sequence[Any], counts: dict[str, dict], sample: int) -> int:
    """Compare the view's counts with claimlog's fold for ``sample`` claims (all, when fewer); raise if any differ."""
    from dataclasses import asdict

    from projections.base import Record
    from projections.claim_page import fold

    by_claim: dict[str, list[Record]] = {}
    for seq, e in enumerate(events, 1):
        by_claim.setdefault(e.claim_id, []).append(Record(seq, e.occurred_at, e))
    drafted = {claim_id for claim_id, records in by_claim.items() if any(r.event.type == "ClaimDrafted" for r in records)}
    if set(counts) != drafted:
        raise AssertionError(f"the peer's view has {len(counts)} claims, claimlog's fold {len(drafted)}")
    chosen = sorted(by_claim) if len(by_claim) <= sample else random.Random(1).sample(sorted(by_claim), sample)
    differences = []
    for claim_id in chosen:
        page = fold(by_claim[claim_id])
        expected = asdict(page.counts) if page is not None else None
        if counts.get(claim_id) != expected:
            differences.append(f"{claim_id}: peer {counts.get(claim_id)} != claimlog {expected}")
    if differences:
        raise AssertionError(f"{len(differences)} of {len(chosen)} claims differ, e.g.\n" + "\n".join(differences[:5]))
    return len(chosen)


# -- the entry point -----------------------------------------------------------------------------


def run_peer(events: Sequence[Any], *, database: str, sample: int = 2000, stall_timeout: float = 120.0) -> dict:
    """Store ``events`` (claimlog events, in log order) with the ``eventsourcing`` library, project them
    with its ProjectionRunner, check the counts against claimlog's fold, and return the figures:
    ``stored_per_s``, ``projected_per_s``, ``peak_mb`` (the larger phase's VmHWM) and ``events``, plus
    ``store_peak_mb``, ``project_peak_mb``, ``store_seconds``, ``project_seconds``, ``checked_claims``
    and ``database`` (sqlite or postgres).

    ``database``: a SQLite file path that does not exist yet (left in place afterwards), or a
    PostgreSQL URL (a fresh database is created on that server and dropped at the end).
    """
    claims: dict[str, list[dict]] = {}
    for e in events:
        claims.setdefault(e.claim_id, []).append(e.model_dump(mode="json"))
    with tempfile.TemporaryDirectory(prefix="peer-eventsourcing-") as work, _target(database) as (kind, env):
        log_path, counts_path = Path(work) / "claims.jsonl", Path(work) / "counts.json"
        with open(log_path, "w") as log:
            for claim_id, payloads in claims.items():
                log.write(json.dumps([claim_id, payloads]) + "\n")
        del claims
        stored = _run_child(["store", str(log_path)], env)
        if stored["events"] != len(events):
            raise AssertionError(f"stored {stored['events']} events of {len(events)}")
        projected = _run_child(["project", kind, str(stored["last_id"]), str(counts_path), str(stall_timeout)], env)
        counts = json.loads(counts_path.read_text())
    checked = _check(events, counts, sample)
    return {
        "stored_per_s": stored["events"] / stored["seconds"],
        "projected_per_s": stored["events"] / projected["seconds"],
        "peak_mb": max(stored["peak_mb"], projected["peak_mb"]),
        "events": stored["events"],
        "store_peak_mb": stored["peak_mb"],
        "project_peak_mb": projected["peak_mb"],
        "store_seconds": stored["seconds"],
        "project_seconds": projected["seconds"],
        "checked_claims": checked,
        "database": kind,
    }


def workload(claims: int, per_claim: int, seed: int = 7, block: int = 1000) -> list:
    """Claims' events in log order: blocks of ``block`` claims, each block's events interleaved (as bench/replay.py)."""
    from tests.builders.workload import claim_events

    rng = random.Random(seed)
    events = []
    for start in range(0, claims, block):
        batch = [claim_events(n, per_claim, rng) for n in range(start, min(start + block, claims))]
        for i in range(per_claim):
            events.extend(claim[i] for claim in batch if i < len(claim))
    return events


def main() -> None:
    import argparse

    from rich.console import Console
    from rich.table import Table

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--per-claim", type=int, default=10)
    parser.add_argument("--postgres", help="Also run on PostgreSQL (a fresh database on this server, dropped after).")
    parser.add_argument("--no-sqlite", action="store_true")
    args = parser.parse_args()
    console = Console()
    events = workload(args.claims, args.per_claim)
    results = {}
    with tempfile.TemporaryDirectory(prefix="peer-eventsourcing-") as work:
        targets = {} if args.no_sqlite else {"sqlite": str(Path(work) / "peer.sqlite3")}
        if args.postgres:
            targets["postgresql"] = args.postgres
        for name, database in targets.items():
            with console.status(f"eventsourcing on {name}: {len(events):,} events"):
                results[name] = run_peer(events, database=database)
    table = Table(title=f"eventsourcing {_version()} on {len(events):,} claimlog events ({args.claims:,} claims x {args.per_claim})")
    for column in ("database", "stored/s", "projected/s", "peak MB (store / project)", "claims checked"):
        table.add_column(column)
    for name, r in results.items():
        table.add_row(
            name, f"{r['stored_per_s']:,.0f}", f"{r['projected_per_s']:,.0f}",
            f"{r['peak_mb']:.0f} ({r['store_peak_mb']:.0f} / {r['project_peak_mb']:.0f})", f"{r['checked_claims']:,}",
        )
    console.print(table)
    console.print_json(json.dumps(results))


def _version() -> str:
    from importlib.metadata import version

    return version("eventsourcing")


if __name__ == "__main__":
    main()
