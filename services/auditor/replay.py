"""The auditor's replay: every entry it verified, through the log's admission and the projector's folds,
into a SQLite database of its own; then what the registry serves as of the checkpoint, compared with it.

The entries are the tree's own (the mirror holds every bundle the audit checked against the signed
root), so the replay needs no NATS credential and no trust in the registry beyond its signed log. Each
entry becomes the delivery the projector would have read: its claim and type as an unpartitioned
subject, its store time, its allow-listed headers (signature, proof, message id), its body. The same
``Projector`` as the registry's folds them, and its gate judges each one against the key registry given
(``attribution``), so a forged event folds nowhere here either. Then, claim by claim (every claim, or a
random sample), ``GET /claims/{id}?as_of_seq=<size>`` must equal the replay's page, and
``GET /scorecard?as_of_seq=<size>`` its scorecard; any difference is listed with both values.

The comparison holds only between the same rules: the scorecard names its ``rules_version``, and a
registry folding by other rules than this auditor's is refused, not compared.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, select

from events.key_registry import RegistryChangeError, decode_change
from events.log_entry import PREDECESSOR_LINE, SIGNATURE, EntryError, LogEntry, decode_entry
from events.subjects import REGISTRY
from projections.registry import build_projections
from projections.scorecard import RULES_VERSION
from projections.tables import claim_pages
from services.admission.registry import attribution_from_log
from services.auditor.errors import AuditFailure, NotComparable
from services.auditor.mirror import Mirror
from services.log.consumer import Delivery
from services.log.signing import Attribution
from services.projector import Projector
from services.read_api import queries
from services.read_api.aggregates import tally_scorecard
from services.runtime.db import make_engine, upgrade
from tlog.tiles import HEIGHT, WIDTH, Tile, decode_bundle

GetJson = Callable[[str], Awaitable[tuple[int, object]]]  # a path from the API's root -> (status, parsed JSON)
BATCH = 1000


@dataclass
class Difference:
    """One thing the registry serves otherwise than the log's entries fold to."""

    what: str  # "claim CLM-0338", "scorecard"
    served: object
    replayed: object

    def __str__(self) -> str:
        paths = differing(self.served, self.replayed)
        shown = "; ".join(f"{path or '(whole)'}: served {_short(a, 120)}, folded {_short(b, 120)}" for path, a, b in paths[:5])
        more = f" (and {len(paths) - 5} more)" if len(paths) > 5 else ""
        return f"{self.what} differs from what the log's entries fold to: {shown}{more}"


def differing(served: object, replayed: object, path: str = "") -> list[tuple[str, object, object]]:
    """Where two JSON values differ: each differing leaf's path (``sources[0].relation``) with both values."""
    if isinstance(served, dict) and isinstance(replayed, dict):
        found = []
        for key in sorted(set(served) | set(replayed), key=str):
            here = f"{path}.{key}" if path else str(key)
            found += differing(served.get(key), replayed.get(key), here) if key in served and key in replayed else [(here, served.get(key), replayed.get(key))]
        return found
    if isinstance(served, list) and isinstance(replayed, list) and len(served) == len(replayed):
        return [d for i, (a, b) in enumerate(zip(served, replayed, strict=True)) for d in differing(a, b, f"{path}[{i}]")]
    return [] if served == replayed else [(path, served, replayed)]


@dataclass
class Comparison:
    size: int
    rules_version: int
    claims_compared: int = 0
    claims_in_log: int = 0
    differences: list[Difference] = field(default_factory=list)
    not_replayable: list[int] = field(default_factory=list)  # entries holding only their body's digest


def mirrored_entries(mirror: Mirror, size: int) -> Iterator[tuple[int, bytes]]:
    """Each entry of the tree of ``size``, by index, from the bundles the mirror holds (the audit checked them)."""
    for index in range((size + WIDTH - 1) >> HEIGHT):
        width = min(WIDTH, size - (index << HEIGHT))
        for offset, entry in enumerate(decode_bundle(mirror.tile(Tile(None, index, width)))):
            yield (index << HEIGHT) + offset, entry


def delivery(seq: int, data: bytes) -> Delivery:
    """The delivery the projector would have read for the entry of the message at stream sequence ``seq``; one
    that is not a version-1 entry is delivered without a subject or body the gate could admit, so it is
    refused there, as its message was."""
    try:
        entry = decode_entry(data)
    except EntryError:
        return Delivery(seq, 0, "claims.unreadable.Unreadable", b"", "", None)
    return _from_entry(seq, entry)


def _from_entry(seq: int, entry: LogEntry) -> Delivery:
    stored_ns = int(entry.stored_at.timestamp()) * 1_000_000_000 + entry.stored_at.microsecond * 1000
    return Delivery(seq, stored_ns, f"claims.{entry.claim_id}.{entry.event_type}", entry.body, "", dict(entry.headers) or None)


def entry_offset(mirror: Mirror, size: int) -> int:
    """1 when entry 0 of the tree names a previous log (a new log identity: entry ``i`` is then the message at
    stream sequence ``i``), else 0 (entry ``i`` is the message at sequence ``i + 1``)."""
    if size == 0:
        return 0
    first = decode_bundle(mirror.tile(Tile(None, 0, min(WIDTH, size))))[0]
    return 1 if first.startswith(PREDECESSOR_LINE + b"\n") else 0


class EntryLog:
    """What the projector reads from in a replay: the entries' deliveries, a batch per call, judged by
    the gate against ``attribution`` (the key registry the replay is given)."""

    def __init__(self, deliveries: Sequence[Delivery] | Callable[[int], Iterator[Delivery]], attribution: Attribution) -> None:
        """``deliveries``: all of them in memory (the message at sequence ``s`` at index ``s - 1``), or a function
        giving those after a sequence in order, read as the projector asks (a large log need not fit in memory)."""
        self._after = deliveries if callable(deliveries) else lambda after_seq: iter(deliveries[after_seq:])
        self._pending: Iterator[Delivery] = iter(())
        self._batch = BATCH
        self.attribution = attribution

    def consumer(self, name: str, *, max_batch: int, partitions: Sequence[int] | None = None) -> EntryLog:
        self._batch = max_batch  # one runner over the whole log: nothing to filter by partition
        return self

    async def start(self, after_seq: int) -> None:
        self._pending = self._after(after_seq)

    async def stop(self) -> None:
        pass

    async def next_batch(self, **_options) -> list[Delivery]:
        await asyncio.sleep(0)  # a real consumer waits here: the previous batch's commit goes on meanwhile
        batch = list(itertools.islice(self._pending, self._batch))
        if not batch:
            await asyncio.sleep(0.005)
        return batch

    async def ack_through(self, delivery: Delivery) -> None:
        pass

    async def ack_batch(self, batch: Sequence[Delivery]) -> None:
        pass


def replay_keys(mirror: Mirror, size: int) -> Attribution:
    """The key registry the replay's gate judges signatures by, as the log's own entries record it (its
    changes on the reserved ``_registry`` token: docs/events.md#the-key-registry); ``NotComparable`` when
    an entry is signed and the entries hold no registry, or a change cannot be read."""
    changes, first_signed = [], None
    for index, data in mirrored_entries(mirror, size):
        try:
            entry = decode_entry(data)
        except EntryError:
            continue
        if entry.claim_id == REGISTRY:
            try:
                changes.append(decode_change(entry.body))
            except RegistryChangeError as error:
                raise NotComparable(f"entry {index} is a key-registry change that cannot be read ({error})") from None
        elif first_signed is None and SIGNATURE in dict(entry.headers):
            first_signed = index
    if first_signed is not None and not changes:
        raise NotComparable(f"entry {first_signed} is signed, and the log's entries hold no key registry to judge its "
                            "signature by: its pages cannot be replayed from public data")
    try:
        return attribution_from_log(changes)
    except RegistryChangeError as error:
        raise NotComparable(f"the key registry's changes in the log contradict each other ({error})") from None


async def replay(mirror: Mirror, size: int, database: Path, attribution: Attribution) -> tuple[Engine, list[int]]:
    """Fold the tree's ``size`` entries into a fresh SQLite database at ``database``; the engine, and the
    entries that hold only their body's digest (their claims cannot be replayed from the log's entries)."""
    database.unlink(missing_ok=True)
    engine = make_engine(f"sqlite:///{database}")
    upgrade(engine)
    digests: set[int] = set()
    offset = entry_offset(mirror, size)

    def deliveries(after_seq: int) -> Iterator[Delivery]:
        """The deliveries after ``after_seq``, read from the mirror's bundles as the projector asks for them."""
        for index, data in mirrored_entries(mirror, size):
            seq = index + 1 - offset
            if index < offset or seq <= after_seq:
                continue  # the predecessor entry (no message of the stream), or one folded already
            found = delivery(seq, data)
            if not found.data and found.subject != "claims.unreadable.Unreadable":
                digests.add(index)
            yield found

    if size > offset:
        projector = Projector(EntryLog(deliveries, attribution), engine, build_projections(), name="audit", batch=BATCH)
        await projector.run_until(size - offset, timeout=None)
    return engine, sorted(digests)


async def compare(
    get: GetJson, engine: Engine, size: int, *, sample: int | None = None, rng: random.Random | None = None,
    not_replayable: Sequence[int] = (), progress: Callable[[int, int], None] = lambda done, total: None,
) -> Comparison:
    """What the registry serves as of ``size`` against the replay in ``engine``: the scorecard, then every
    claim's page (or ``sample`` of them, drawn at random)."""
    status, card = await get(f"/scorecard?as_of_seq={size}")
    if status != 200 or not isinstance(card, dict):
        raise AuditFailure(f"/scorecard?as_of_seq={size} answered {status}: {_short(card)}")
    rules = card.get("rules_version")
    if rules != RULES_VERSION:
        raise NotComparable(f"the registry counts by scorecard rules version {rules}, this auditor by {RULES_VERSION}: "
                           "pages folded by other rules cannot be compared; audit with a claimlog of the registry's rules")
    result = Comparison(size, RULES_VERSION, not_replayable=list(not_replayable))
    with engine.connect() as conn:
        own_card = tally_scorecard(queries.scorecard_rows(conn, None), applied_seq=size).model_dump(mode="json")
        if card != own_card:
            result.differences.append(Difference("scorecard", card, own_card))
        claims = list(conn.execute(select(claim_pages.c.claim_id).order_by(claim_pages.c.first_seq)).scalars())
        result.claims_in_log = len(claims)
        if sample is not None and sample < len(claims):
            claims = sorted((rng or random.SystemRandom()).sample(claims, sample))
        for done, claim_id in enumerate(claims, start=1):
            own = queries.claim_page_json(conn, claim_id)
            replayed = json.loads(own[0]) if own is not None else None
            status, served = await get(f"/claims/{quote(claim_id, safe='')}?as_of_seq={size}")
            if status != 200:
                served = {"status": status, "body": served}
            if served != replayed:
                result.differences.append(Difference(f"claim {claim_id}", served, replayed))
            result.claims_compared += 1
            progress(done, len(claims))
    return result


def _short(value: object, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."
