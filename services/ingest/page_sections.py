"""The disagreements and reviews sections of a registry page's text, and who brought a source: parsed and
written back.

An item is a "- " line; what belongs to it follows on lines indented by two spaces ("  Evidence: ...",
"  Answered by ...", "  Upheld by ...", "  Withdrawn by ..."), and a value's own line breaks continue on
lines indented by four. A source may have one such line, "  Brought by <who>.", when who brought it is
known (the registry's own pages never say). Who wrote each part is named as the page shows a person, a service or a model:
``alice (person)``, ``ingest-bot (service)``, ``reviewer-7 (model: <model name>)``. Pure, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, get_args

from pydantic import ValidationError

from events import Actor
from events.claim import Confidence
from events.disagreement import Outcome
from events.review import Verdict

DISAGREEMENTS = "Disagreements"
REVIEWS = "Reviews"
OUTCOMES: tuple[str, ...] = get_args(Outcome)
VERDICTS: tuple[str, ...] = get_args(Verdict)
CONTINUED = "    "
BROUGHT = "  Brought by"

_ACTOR = r"(?P<{0}>[A-Za-z0-9][A-Za-z0-9._@+-]{{0,127}}) \((?:(?P<{0}_kind>person|service)|model: (?P<{0}_model>.+?))\)"
_TEXT = r"(?:: (?P<text>.*)|\.)"
_FILED = re.compile(rf"- Filed by {_ACTOR.format('who')}(?: about source (?P<source>[0-9]+))?{_TEXT}", re.S)
_PART = re.compile(rf"  (?P<what>Answered|Upheld|Rejected|Withdrawn) by {_ACTOR.format('who')}{_TEXT}", re.S)
_BROUGHT = re.compile(rf"{BROUGHT} {_ACTOR.format('who')}\.")
_REVIEW = re.compile(
    rf"- (?P<verdict>{'|'.join(v.capitalize() for v in VERDICTS)}), confidence (?P<confidence>[a-z]+), "
    rf"of revision (?P<revision>[0-9]+), by {_ACTOR.format('who')}{_TEXT}", re.S)


@dataclass(frozen=True)
class PagePart:
    """Something said on a page, and who the page says said it."""

    writer: Actor
    text: str | None


@dataclass(frozen=True)
class PageDisagreement:
    filed: PagePart  # the argument
    source: int | None  # 1-based, among the sources the page lists
    evidence: str | None
    answers: tuple[PagePart, ...]
    outcome: str | None
    resolved: PagePart | None  # the note, if any
    line: int


@dataclass(frozen=True)
class PageReview:
    recorded: PagePart  # the summary, if any
    verdict: str
    confidence: str
    revision: int
    withdrawn: PagePart | None  # the reason
    line: int


class Reader(Protocol):
    lines: list[str]
    index: int

    def peek(self) -> str | None: ...
    def fail(self, problem: str, line: int | None = None) -> ValueError: ...


def actor_text(actor: Actor) -> str:
    """An actor as a page names it."""
    return f"{actor.id} (model: {actor.model})" if actor.model else f"{actor.id} ({actor.kind.value})"


def _continued(text: str, indent: str = CONTINUED) -> str:
    return text.replace("\n", "\n" + indent)


def _said(line: str, part: PagePart, after: str = "") -> str:
    return f"{line} {actor_text(part.writer)}{after}" + (f": {_continued(part.text)}" if part.text else ".")


def render_disagreement(disagreement: PageDisagreement) -> list[str]:
    """A disagreement's lines."""
    about = f" about source {disagreement.source}" if disagreement.source else ""
    lines = [_said("- Filed by", disagreement.filed, about)]
    if disagreement.evidence:
        lines.append(f"  Evidence: {_continued(disagreement.evidence)}")
    lines += [_said("  Answered by", answer) for answer in disagreement.answers]
    if disagreement.resolved is not None:
        lines.append(_said(f"  {(disagreement.outcome or '').capitalize()} by", disagreement.resolved))
    return lines


def render_review(review: PageReview) -> list[str]:
    """A review's lines."""
    head = f"- {review.verdict.capitalize()}, confidence {review.confidence}, of revision {review.revision}, by"
    lines = [_said(head, review.recorded)]
    if review.withdrawn is not None:
        lines.append(_said("  Withdrawn by", review.withdrawn))
    return lines


def render_brought(brought: Actor | None) -> list[str]:
    """The line under a source naming who brought it; none when that is not known."""
    return [] if brought is None else [_said(BROUGHT, PagePart(brought, None))]


def parse_brought(reader: Reader) -> Actor | None:
    """Who brought the source just read, from the "  Brought by <who>." line at the cursor, if there is one."""
    found = reader.peek()
    if found is None or not found.startswith("  "):
        return None
    line, reader.index = reader.index + 1, reader.index + 1
    said = _BROUGHT.fullmatch(found)
    if not said:
        shape = f"{BROUGHT.strip()} <who> (person|service|model: <name>)."
        raise reader.fail(f'expected who brought the source above, "  {shape}", found "{found[:60]}"', line)
    brought = _writer(reader, said, line, "who brought it")
    if (extra := reader.peek()) is not None and extra.startswith("  "):
        raise reader.fail(f'expected one "{BROUGHT.strip()} <who>." line under a source, found another: "{extra[:60]}"')
    return brought


def _item(reader: Reader) -> list[tuple[int, str]]:
    """The "- " line at the cursor and its "  " lines, each with its continuation lines joined in."""
    taken: list[tuple[int, str]] = []
    while (found := reader.peek()) is not None and (not taken and found.startswith("- ") or taken and found.startswith("  ")):
        if found.startswith(CONTINUED) and taken:
            taken[-1] = (taken[-1][0], taken[-1][1] + "\n" + found[len(CONTINUED):])
        else:
            taken.append((reader.index + 1, found))
        reader.index += 1
    return taken


def _writer(reader: Reader, found: re.Match, line: int, who: str = "who wrote it") -> Actor:
    kind = found["who_kind"] or "model"
    try:
        return Actor(id=found["who"], kind=kind, model=found["who_model"])
    except ValidationError as error:
        raise reader.fail(f"{who}: {error.errors()[0]['msg']}", line) from None


def parse_disagreements(reader: Reader, sources: int) -> tuple[PageDisagreement, ...]:
    """The items of a disagreements section, the cursor past its heading."""
    items = []
    while (parts := _item(reader)):
        line, head = parts[0]
        found = _FILED.fullmatch(head)
        if not found:
            shape = "- Filed by <who> (person|service|model: <name>)[ about source <n>]: <argument>"
            raise reader.fail(f'expected a disagreement "{shape}", found "{head[:60]}"', line)
        source = int(found["source"]) if found["source"] else None
        if source is not None and not 1 <= source <= sources:
            raise reader.fail(f"about source {source}, but the page lists {sources} source(s)", line)
        filed, evidence, answers, outcome, resolved = PagePart(_writer(reader, found, line), found["text"]), None, [], None, None
        for at, text in parts[1:]:
            if text.startswith("  Evidence: ") and evidence is None and not answers:
                evidence = text[len("  Evidence: "):]
                continue
            part = _PART.fullmatch(text)
            if not part or resolved is not None or (part["what"] != "Answered" and part["what"].lower() not in OUTCOMES):
                shape = '"  Evidence: ...", "  Answered by <who>: ...", then "  Upheld|Rejected|Withdrawn by <who>[: note]"'
                raise reader.fail(f'expected {shape}, found "{text[:60]}"', at)
            said = PagePart(_writer(reader, part, at), part["text"])
            if part["what"] == "Answered":
                answers.append(said)
            else:
                outcome, resolved = part["what"].lower(), said
        items.append(PageDisagreement(filed, source, evidence, tuple(answers), outcome, resolved, line))
    return tuple(items)


def parse_reviews(reader: Reader) -> tuple[PageReview, ...]:
    """The items of a reviews section, the cursor past its heading."""
    items = []
    while (parts := _item(reader)):
        line, head = parts[0]
        found = _REVIEW.fullmatch(head)
        if not found or found["confidence"] not in get_args(Confidence):
            shape = "- <Sound|Unsound|Inconclusive>, confidence <low|medium|high>, of revision <n>, by <who>[: summary]"
            raise reader.fail(f'expected a review "{shape}", found "{head[:60]}"', line)
        withdrawn = None
        for at, text in parts[1:]:
            part = _PART.fullmatch(text)
            if not part or part["what"] != "Withdrawn" or withdrawn is not None or not part["text"]:
                raise reader.fail(f'expected "  Withdrawn by <who>: <reason>", found "{text[:60]}"', at)
            withdrawn = PagePart(_writer(reader, part, at), part["text"])
        recorded = PagePart(_writer(reader, found, line), found["text"])
        items.append(PageReview(recorded, found["verdict"].lower(), found["confidence"], int(found["revision"]),
                                withdrawn, line))
    return tuple(items)
