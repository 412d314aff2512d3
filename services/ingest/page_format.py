"""Parse and render the text of a public registry page (see samples/). Pure functions, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import get_args

from events import Actor
from events.claim import Confidence
from services.ingest.page_sections import (
    DISAGREEMENTS,
    REVIEWS,
    PageDisagreement,
    PageReview,
    parse_brought,
    parse_disagreements,
    parse_reviews,
    render_brought,
    render_disagreement,
    render_review,
)

INVITATION = (
    "Disagreeing is the most useful thing you can do here. Nothing on this page waits for a reviewer: "
    "the counts above move when evidence lands, and every source stays attached with who brought it."
)
UNREVIEWED_NOTE = (
    "Drafted from the paper by a model and filed unreviewed. Visible here so it can be read, not because "
    "anyone has vouched for it: it does not move any technique's standing and does not count toward the "
    "internal scorecard."
)
RELATION_WORDS = {"Validated": "validates", "Supported": "supports", "Contradicted": "contradicts",
                  "Qualified": "qualifies", "Mentioned": "mentions"}
CONFIDENCES: tuple[str, ...] = get_args(Confidence)
SECTIONS = ("Capability", "Observed on", "Sources", DISAGREEMENTS, REVIEWS, "Related claims", "Notes")
TRUNCATED = " [truncated]"
REVIEW_SEPARATOR = " · "
FALSIFIER = "Falsifier as drafted: "
MEASURED = "Measured"

_CLAIM_ID = re.compile(r"CLM-[0-9]{4,12}")
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_SOURCE = re.compile(r"- (?P<word>[^:]*?) by: (?P<body>.*)")
# Greedy: the capability starts after the *last* sentence end that is followed by a capital letter.
_STATEMENT_CAPABILITY = re.compile(r"(?P<statement>.*[.!?]\)?)(?P<capability>[A-Z][^.]*)")
_CONFIDENCE = re.compile(r"Drafted confidence: (?P<value>[^.]*)\.")


def caveats(breadth: str) -> tuple[str, str]:
    """A source's measurement caveats as the registry labels them: ("Measured:", text), or ("Measured", rest)
    when the caveats are a sentence of their own that starts with the word ("Measured across three sizes")."""
    if breadth.startswith(MEASURED + ": "):
        return MEASURED + ":", breadth[len(MEASURED) + 2:]
    if breadth.startswith(MEASURED + " "):
        return MEASURED, breadth[len(MEASURED) + 1:]
    return MEASURED + ":", breadth


@dataclass(frozen=True)
class PageSource:
    relation: str
    measured: str
    breadth: str | None
    truncated: bool
    line: int
    brought: Actor | None = None  # who the page says brought it; the registry's own pages never say


@dataclass(frozen=True)
class PageRelated:
    statement: str
    capability: str
    review_label: str | None
    line: int


@dataclass(frozen=True)
class RegistryPage:
    path: str
    claim_id: str
    slug: str
    statement: str
    capability: str
    observed_on: str
    sources: tuple[PageSource, ...]
    related: tuple[PageRelated, ...]
    drafted_confidence: str | None
    falsifier: str | None
    reviewed: bool
    # Sections the registry's own pages leave out when there is nothing in them.
    disagreements: tuple[PageDisagreement, ...] = ()
    reviews: tuple[PageReview, ...] = ()


class PageFormatError(ValueError):
    """A page breaks the format: names the file, the 1-based line and what was expected and found."""

    def __init__(self, path: str, line: int, problem: str):
        super().__init__(f"{path}:{line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


def _shown(found: str | None, tail: bool = False) -> str:
    if found is None:
        return "the end of the file"
    if len(found) <= 40:
        return f'"{found}"'
    return f'"...{found[-40:]}"' if tail else f'"{found[:40]}..."'


class _Reader:
    """The page's lines and a cursor over them."""

    def __init__(self, text: str, path: str):
        text = text.replace("\r\n", "\n")
        self.lines = (text[:-1] if text.endswith("\n") else text).split("\n")
        self.path, self.index = path, 0

    def peek(self) -> str | None:
        return self.lines[self.index] if self.index < len(self.lines) else None

    def fail(self, problem: str, line: int | None = None) -> PageFormatError:
        return PageFormatError(self.path, line or self.index + 1, problem)

    def take(self, shape: str, prefix: str | None = None) -> str:
        """Take the next line: exactly `shape`, or any line starting with `prefix` when one is given."""
        found = self.peek()
        if found is None or (found != shape if prefix is None else not found.startswith(prefix)):
            heads = [s for s in SECTIONS if found in (s, s + ":") or (found or "").startswith(s + ": ")]
            misplaced = bool(heads) and not shape.startswith(heads[0])
            order = f" (a section out of order: they come as {', '.join(SECTIONS)})" if misplaced else ""
            raise self.fail(f'expected "{shape}", found {_shown(found)}{order}')
        self.index += 1
        return found if prefix is None else found[len(prefix):]

    def items(self) -> list[tuple[int, str]]:
        """Take the "- " lines that follow, with their line numbers."""
        taken = []
        while (found := self.peek()) is not None and found.startswith("- "):
            taken.append((self.index + 1, found))
            self.index += 1
        return taken


def _without_period(reader: _Reader, text: str, what: str, line: int) -> str:
    if not text.endswith(".") or not text[:-1].strip():
        problem = f'expected the {what} followed by the "." the page appends, found {_shown(text)}'
        raise reader.fail(problem, line)
    return text[:-1]


def _parse_title(reader: _Reader) -> tuple[str, str, str]:
    slug, _, rest = reader.take("<slug> <CLAIM-ID><statement>", prefix="").partition(" ")
    # Digits are taken greedily: a statement glued to the id cannot start with a digit.
    claim_id = "".join(re.findall(r"\ACLM-[0-9]+", rest))
    problem = None
    if not _SLUG.fullmatch(slug) or len(slug) > 200:
        problem = f"expected a slug (lowercase letters, digits, hyphens) first, found {_shown(slug)}"
    elif not _CLAIM_ID.fullmatch(claim_id):
        problem = f"expected a claim id (CLM- and 4 to 12 digits) after the slug, found {_shown(rest)}"
    elif not rest[len(claim_id):].strip():
        problem = f"expected a statement glued to the claim id {claim_id}, found nothing"
    if problem:
        raise reader.fail(problem, 1)
    return slug, claim_id, rest[len(claim_id):]


def _parse_source(reader: _Reader, line: int, text: str) -> PageSource:
    found = _SOURCE.fullmatch(text)
    if not found:
        raise reader.fail(f'expected a source "- <Relation> by: <measured>", found {_shown(text)}', line)
    relation = RELATION_WORDS.get(found["word"])
    if relation is None:
        known = ", ".join(f'"{word} by"' for word in RELATION_WORDS)
        raise reader.fail(f'expected a source relation ({known}), found "{found["word"]} by"', line)
    body = found["body"]
    truncated = body.endswith(TRUNCATED)
    body = body[: -len(TRUNCATED)] if truncated else body
    head, separator, breadth = body.partition(".. ")
    # The page appends "." to the measured text, then " <breadth>": a measured text followed by a
    # breadth ends with its own ".", which is what makes ".. " the split.
    measured = _without_period(reader, head + "." if separator else body, "measured text", line)
    if separator:
        # "Measured: <caveats>" keeps the caveats alone; "Measured across ..." is a sentence, kept whole.
        label, text = caveats(breadth)
        return PageSource(relation, measured + ".", text if label.endswith(":") else breadth, truncated, line)
    return PageSource(relation, measured, None, truncated, line)


def _parse_sources(reader: _Reader) -> tuple[PageSource, ...]:
    sources = []
    while (found := reader.peek()) is not None and found.startswith("- "):
        reader.index += 1
        source = _parse_source(reader, reader.index, found)
        sources.append(replace(source, brought=parse_brought(reader)))
    return tuple(sources)


def _parse_related(reader: _Reader, line: int, text: str) -> PageRelated:
    head, separator, label = text[2:].rpartition(REVIEW_SEPARATOR)
    if not separator:
        shape = f"- <statement><Capability>{REVIEW_SEPARATOR}<review label>"
        raise reader.fail(f'expected a related claim "{shape}", found {_shown(text)} with no "·"', line)
    split = _STATEMENT_CAPABILITY.fullmatch(head)
    if not split:
        raise reader.fail(
            'expected the related statement to end with ".", "!" or "?" right before a capability that '
            f'starts with a capital and has no ".", found {_shown(head, tail=True)}', line)
    return PageRelated(split["statement"], split["capability"], label or None, line)


def _parse_notes(reader: _Reader) -> tuple[str | None, str | None, bool]:
    first = reader.index + 1
    head, marker, falsifier = "\n".join(reader.lines[reader.index:]).partition(FALSIFIER)
    found = _CONFIDENCE.search(head)
    if found and found["value"] not in CONFIDENCES:
        line = first + head[: found.start()].count("\n")
        raise reader.fail(f'expected drafted confidence "low", "medium" or "high", found "{found["value"]}"',
                          line)
    confidence = found["value"] if found else None
    # The falsifier is free text: only the notes before it say whether the page was reviewed.
    return confidence, (falsifier or None) if marker else None, "filed unreviewed" not in head


def parse_page(text: str, path: str = "<text>") -> RegistryPage:
    """Parse a registry page's text, raising PageFormatError at the first line that breaks the format."""
    if not text.strip():
        raise PageFormatError(path, 1, 'expected "<slug> <CLAIM-ID><statement>", found an empty file')
    reader = _Reader(text, path)
    slug, claim_id, statement = _parse_title(reader)
    capability = reader.take("Capability: <capability>", prefix="Capability: ")
    if not capability.strip():
        raise reader.fail('expected a capability after "Capability: ", found nothing', 2)
    reader.take("Observed on")
    observed_on = _without_period(reader, reader.take("<observed text>.", prefix=""), "observed-on text", 4)
    reader.take("Sources")
    sources = _parse_sources(reader)
    disagreements = reviews = ()
    if reader.peek() == DISAGREEMENTS:
        reader.index += 1
        disagreements = parse_disagreements(reader, len(sources))
    if reader.peek() == INVITATION:
        reader.index += 1
    if reader.peek() == REVIEWS:
        reader.index += 1
        reviews = parse_reviews(reader)
    reader.take("Related claims")
    related = tuple(_parse_related(reader, line, item) for line, item in reader.items())
    reader.take("Notes")
    confidence, falsifier, reviewed = _parse_notes(reader)
    return RegistryPage(path, claim_id, slug, statement, capability, observed_on, sources, related,
                        confidence, falsifier, reviewed, disagreements, reviews)


def _render_source(source: PageSource) -> list[str]:
    word = {relation: word for word, relation in RELATION_WORDS.items()}[source.relation]
    body = source.measured + ("." if source.breadth is None else ". " + " ".join(caveats(source.breadth)))
    return [f"- {word} by: {body}{TRUNCATED if source.truncated else ''}", *render_brought(source.brought)]


def _render_notes(page: RegistryPage) -> str:
    parts = [] if page.reviewed else [UNREVIEWED_NOTE]
    if page.drafted_confidence is not None:
        parts.append(f"Drafted confidence: {page.drafted_confidence}.")
    if page.falsifier is not None:
        parts.append(FALSIFIER + page.falsifier)
    return " ".join(parts)


def render_page(page: RegistryPage) -> str:
    """Write a page in the registry's text format, without a trailing newline."""
    related = (f"- {r.statement}{r.capability}{REVIEW_SEPARATOR}{r.review_label or ''}" for r in page.related)
    notes = _render_notes(page)
    disagreements = [line for d in page.disagreements for line in render_disagreement(d)]
    reviews = [line for r in page.reviews for line in render_review(r)]
    sources = [line for s in page.sources for line in _render_source(s)]
    lines = [f"{page.slug} {page.claim_id}{page.statement}", f"Capability: {page.capability}", "Observed on",
             f"{page.observed_on}.", "Sources", *sources,
             *([DISAGREEMENTS, *disagreements] if disagreements else []), INVITATION,
             *([REVIEWS, *reviews] if reviews else []), "Related claims", *related, "Notes", *([notes] if notes else [])]
    return "\n".join(lines)
