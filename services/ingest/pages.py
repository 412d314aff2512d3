"""Import registry pages: parse every file first, then append each page's missing events atomically."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from events import Actor, new_event_id
from events.envelope import utc_now
from projections.base import Record
from projections.claim_page import fold
from services.admission import admitted_only, gate_for
from services.commands.attempts import ATTEMPTS, until_stored
from services.commands.slugs import slug_owners
from services.ingest.importer import PAGE_IMPORTER, ImportContext, ImportRefused, decide_import
from services.ingest.page_format import PageFormatError, RegistryPage, parse_page
from services.log import ClaimLog, ConflictError

SAMPLES = Path(__file__).parent / "samples"


@dataclass(frozen=True)
class PageOutcome:
    """What importing one file did."""

    path: str
    claim_id: str | None
    published: int
    last_seq: int | None = None
    error: str | None = None


def sample_pages() -> list[Path]:
    """The registry pages shipped with claimlog as sample data."""
    return sorted(SAMPLES.glob("*.txt"))


def read_page(path: Path) -> RegistryPage:
    """Parse one file, turning unreadable bytes into a format error that names the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise PageFormatError(str(path), 1, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise PageFormatError(str(path), 1, f"cannot read the file: {error.strerror}") from None
    return check_fields(parse_page(text, str(path)), text)


def check_fields(page: RegistryPage, text: str) -> RegistryPage:
    """Refuse a page with a field no event can hold (a statement over 20,000 characters, say), naming its line."""
    ctx = ImportContext(actor=PAGE_IMPORTER, now=utc_now(), correlation_id=new_event_id())
    lines = text.replace("\r\n", "\n").split("\n")
    notes = lines.index("Notes") + 2 if "Notes" in lines else 1
    alone = replace(page, sources=(), related=(), disagreements=(), reviews=())
    parts = [(alone, None)]
    parts += [(replace(alone, sources=(s,)), s.line) for s in page.sources]
    parts += [(replace(alone, related=(r,)), r.line) for r in page.related]
    parts += [(replace(alone, sources=page.sources, disagreements=(d,)), d.line) for d in page.disagreements]
    parts += [(replace(alone, reviews=(r,)), r.line) for r in page.reviews]
    for part, line in parts:
        try:
            decide_import(part, None, ctx)
        except ImportRefused as error:  # a review by whom the page says drafted it, say
            raise PageFormatError(page.path, line or 1, str(error)) from None
        except ValidationError as error:
            problem = error.errors()[0]
            field = str(problem["loc"][0]) if problem["loc"] else "page"
            where = line or {"slug": 1, "statement": 1, "capability": 2, "observed_on": 4}.get(field, notes)
            raise PageFormatError(page.path, where, f"{field}: {problem['msg']}") from None
    return page


async def import_page(
    log: ClaimLog, page: RegistryPage, *, actor: Actor = PAGE_IMPORTER, clock: Callable[[], datetime] = utc_now
) -> PageOutcome:
    """Append what the log lacks of one page, retrying when another writer moved the claim meanwhile.
    A page that drafts its claim takes its slug first, and gives it back when its draft is not stored."""
    slugs, took, head_seq = slug_owners(log), False, 0

    async def attempt() -> PageOutcome:
        nonlocal took, head_seq
        stored = await log.read_claim(page.claim_id)  # each attempt reads the claim anew
        gate = await gate_for(log, (s.signature for s in stored))
        current = fold(Record(a.seq, a.stored_at, a.event) for a in admitted_only(gate, stored))  # what readers show
        ctx = ImportContext(actor=actor, now=clock(), correlation_id=new_event_id())
        try:
            events = decide_import(page, current, ctx)
        except ImportRefused as error:  # the claim as the log holds it takes no such events (retracted, say)
            return PageOutcome(page.path, page.claim_id, 0, error=f"{page.path}: {error}")
        if not events:
            return PageOutcome(page.path, page.claim_id, 0, stored[-1].seq if stored else None)
        if drafts(events):
            owner, taken = await slugs.take(page.slug, page.claim_id)
            took = took or taken
            if owner != page.claim_id:
                return slug_refused(page, owner)
        head_seq, head_hash = (stored[-1].seq, stored[-1].hash) if stored else (0, None)
        appended = await log.append(page.claim_id, events, expected_seq=head_seq, prev_hash=head_hash)  # ConflictError: again
        took = False  # stored: the slug stays the claim's
        return PageOutcome(page.path, page.claim_id, 0 if appended.duplicate else len(events), appended.last_seq)

    def moved(attempts: int) -> ConflictError:
        return ConflictError(page.claim_id, head_seq, f"other writers moved it during all {attempts} attempts")

    try:
        return await until_stored(page.claim_id, attempt, attempts=ATTEMPTS, exhausted=moved)
    finally:
        if took:  # not stored, or an append failed: given back unless the log holds the draft
            await slugs.give_back_unless_drafted(page.slug, page.claim_id)


def drafts(events: list) -> bool:
    """Whether a page's events draft its claim (a draft is a claim's first event)."""
    return bool(events) and events[0].type == "ClaimDrafted"


def slug_refused(page: RegistryPage, owner: str) -> PageOutcome:
    """A page refused because another claim holds its slug (as the API refuses it: ``slug_taken``)."""
    return PageOutcome(page.path, page.claim_id, 0, error=f"{page.path}:1: slug {page.slug!r} belongs to {owner}: choose another")
