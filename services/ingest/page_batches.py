"""Importing many registry pages in atomic batches over their claims: one synced acknowledgement for
many pages' events instead of one per page.

Pages are taken a group at a time (each claim once in a group); their claims are read together, each
page's missing events decided (``decide_import``) and chained, and the group's claims go out in
batches of up to the server's limit, each claim's first event expecting the claim's last sequence.
A batch refused because a claim moved meanwhile stores nothing: its pages are read and decided again,
up to ``ATTEMPTS`` times; pages of batches that landed keep their outcome. The slugs of a
group's new claims are taken together (``services/commands/slugs.py``, one atomic batch on the bucket):
a page whose slug belongs to another claim is refused, and the slugs of drafts that never landed are
given back at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime

from events import Actor, new_event_id
from events.envelope import utc_now
from projections.base import Record
from projections.claim_page import fold
from services.admission import admitted_only, gate_for
from services.commands.attempts import ATTEMPTS
from services.commands.slugs import SlugOwners, slug_owners
from services.ingest.importer import PAGE_IMPORTER, ImportContext, ImportRefused, decide_import
from services.ingest.page_format import RegistryPage
from services.ingest.pages import PageOutcome, drafts, import_page, slug_refused
from services.log import ClaimLog
from services.log.batches import (
    MAX_BATCH_EVENTS,
    AtomicBatches,
    BatchRefused,
    ClaimShare,
    stream_takes_batches,
)
from services.log.chain import chain

GROUP = 256  # pages read and decided together


async def import_pages(
    log: ClaimLog, pages: Sequence[RegistryPage], *, actor: Actor = PAGE_IMPORTER,
    clock: Callable[[], datetime] = utc_now, on_page: Callable[[], None] = lambda: None,
) -> list[PageOutcome]:
    """Append what the log lacks of every page; one outcome per page, in order."""
    if not await stream_takes_batches(log.nc, log.stream):
        outcomes = []
        for page in pages:
            outcomes.append(await import_page(log, page, actor=actor, clock=clock))
            on_page()
        return outcomes
    outcomes: dict[int, PageOutcome] = {}
    slugs = _Slugs(slug_owners(log))
    try:
        async with AtomicBatches(log.nc, log.stream, layout=log.layout, signer=log.signer) as batches:
            for group in _groups(list(enumerate(pages))):
                for index, outcome in await _import_group(log, batches, group, actor, clock, slugs):
                    outcomes[index] = outcome
                    on_page()
    finally:
        await slugs.owners.give_back_many(slugs.taken)  # their drafts did not land
    return [outcomes[index] for index in range(len(pages))]


class _Slugs:
    """The slugs' owners, and the slugs this import took whose drafts have not landed yet."""

    def __init__(self, owners: SlugOwners) -> None:
        self.owners, self.taken = owners, {}

    async def refused(self, decided) -> list[tuple[int, PageOutcome]]:
        """Take the slugs of the pages that draft their claims; the pages whose slug another claim holds."""
        new = [(index, page) for index, page, share in decided if share and drafts([share.linked[0][0]])]
        wanted: dict[str, str] = {}
        for _, page in new:
            wanted.setdefault(page.slug, page.claim_id)
        owners, taken = await self.owners.take_many(wanted)
        self.taken.update((slug, wanted[slug]) for slug in taken)
        return [(index, slug_refused(page, owners[page.slug])) for index, page in new if owners[page.slug] != page.claim_id]

    def landed(self, chunk) -> None:
        """The chunk's drafts are stored: their slugs stay their claims'."""
        for _, page, share in chunk:
            if share and self.taken.get(page.slug) == page.claim_id:
                del self.taken[page.slug]


def _groups(pages: list[tuple[int, RegistryPage]]) -> list[list[tuple[int, RegistryPage]]]:
    groups: list[list[tuple[int, RegistryPage]]] = [[]]
    for item in pages:
        if len(groups[-1]) == GROUP or any(p.claim_id == item[1].claim_id for _, p in groups[-1]):
            groups.append([])
        groups[-1].append(item)
    return [group for group in groups if group]


async def _import_group(log, batches: AtomicBatches, group, actor: Actor, clock, slugs: _Slugs) -> list[tuple[int, PageOutcome]]:
    done: list[tuple[int, PageOutcome]] = []
    remaining = group
    for _ in range(ATTEMPTS):
        decided, broken = await _decide(log, remaining, actor, clock)
        done.extend(broken)
        refused = await slugs.refused(decided)
        done.extend(refused)
        decided = [item for item in decided if item[0] not in dict(refused)]
        remaining = []
        for chunk in _chunks(decided):
            shares = [share for _, _, share in chunk if share]
            try:
                first = await batches.commit(shares) if shares else 0
            except BatchRefused:
                remaining.extend((index, page) for index, page, _ in chunk)
                continue
            slugs.landed(chunk)
            done.extend(_outcomes(chunk, first))
        if not remaining:
            return done
    message = f"other writers moved its claim during all {ATTEMPTS} attempts"
    return done + [(index, PageOutcome(page.path, page.claim_id, 0, error=f"{page.path}: {message}")) for index, page in remaining]


async def _decide(
    log: ClaimLog, group, actor: Actor, clock
) -> tuple[list[tuple[int, RegistryPage, ClaimShare | None]], list[tuple[int, PageOutcome]]]:
    """Each page's events, or the page refused because its claim as the log holds it takes no such events."""
    stored = await asyncio.gather(*(log.read_claim(page.claim_id) for _, page in group))
    gate = await gate_for(log, (s.signature for events_stored in stored for s in events_stored))
    out, broken = [], []
    for (index, page), events_stored in zip(group, stored, strict=True):
        current = fold(Record(a.seq, a.stored_at, a.event) for a in admitted_only(gate, events_stored))
        try:
            events = decide_import(page, current, ImportContext(actor=actor, now=clock(), correlation_id=new_event_id()))
        except ImportRefused as error:
            broken.append((index, PageOutcome(page.path, page.claim_id, 0, error=f"{page.path}: {error}")))
            continue
        head_seq, head_hash = (events_stored[-1].seq, events_stored[-1].hash) if events_stored else (0, None)
        share = ClaimShare(page.claim_id, head_seq, chain(events, head_hash)) if events else None
        out.append((index, page, share if share else _Unchanged(head_seq)))
    return out, broken


class _Unchanged:
    """A page the log already holds: nothing to send, its claim's last sequence."""

    def __init__(self, seq: int) -> None:
        self.seq = seq

    def __bool__(self) -> bool:
        return False


def _chunks(decided):
    chunk, size = [], 0
    for item in decided:
        count = len(item[2].linked) if item[2] else 0
        if chunk and size + count > MAX_BATCH_EVENTS:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += count
    if chunk:
        yield chunk


def _outcomes(chunk, first: int) -> list[tuple[int, PageOutcome]]:
    out, seq = [], first
    for index, page, share in chunk:
        if share:
            seq += len(share.linked)
            out.append((index, PageOutcome(page.path, page.claim_id, len(share.linked), seq - 1)))
        else:
            out.append((index, PageOutcome(page.path, page.claim_id, 0, share.seq or None)))
    return out
