"""Every reader of a fuzzed log against the log of its admitted events alone (tests/builders/fuzz_run.py).

The live projector's tables are compared in fuzz_checks.py; here the other readers, each through
the gate (services/admission/): the as-of page at several sequences and times, the claim's history, the
write side's claim state (and the sequence its next append expects), the past scorecard, and an export
imported into a fresh stream, whose messages the gate judges as it judged the originals.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.admission import Admitted, Gate, InOrder, gate_for
from services.audit.export import export_log, import_file
from services.commands.claim_state import ClaimState, claim_state
from services.log import ClaimLog, StoredEvent, StreamSpec, connect
from services.runtime.embedded import EmbeddedNats
from services.timeline.as_of import AsOf, page_json_as_of
from services.timeline.history import claim_history
from services.timeline.scorecard import RegistryHistory
from tests.builders.fuzz_checks import Problems, _renumbered

CLAIMS = 6  # claims whose as-of pages, history and state are compared
POINTS = 4  # points of the log each is compared at


async def check_readers(live: ClaimLog, clean: ClaimLog, seqs: dict[int, int], problems: Problems, *, rng: random.Random) -> None:
    """Each reader of ``live`` equals the same reader of ``clean`` (its admitted events; ``seqs`` maps sequences)."""
    renumber: Callable[[int], Any] = lambda seq: seqs.get(seq, f"unmapped {seq}")  # noqa: E731
    live_gate, clean_gate = await gate_for(live), await gate_for(clean)
    head = await live.head()
    claims = sorted({stored.subject.split(".")[-2] for stored in await _all(clean)})
    points = sorted(rng.sample(range(1, head + 1), min(POINTS, head))) + [head]
    for claim in rng.sample(claims, min(CLAIMS, len(claims))):
        mine, theirs = await live.read_claim(claim), await clean.read_claim(claim)
        for point in points:
            at = _mapped(seqs, point)
            await _same_page(live, clean, claim, AsOf(seq=point), AsOf(seq=at), renumber, problems)
        for stored in rng.sample(mine, min(2, len(mine))):
            await _same_page(live, clean, claim, AsOf(at=stored.stored_at), AsOf(at=stored.stored_at), renumber, problems)
        _same_history(claim, mine, theirs, live_gate, clean_gate, renumber, problems)
        _same_state(claim, mine, theirs, live_gate, clean_gate, renumber, problems)
    for point in points:
        _, rows = await RegistryHistory().rows(live, AsOf(seq=point))
        _, clean_rows = await RegistryHistory().rows(clean, AsOf(seq=_mapped(seqs, point)))
        if sorted(rows, key=repr) != sorted(clean_rows, key=repr):
            problems.append(f"the past scorecard at {point} differs from the admitted events' at {_mapped(seqs, point)}")


async def check_export_import(live: ClaimLog, workdir: Path, problems: Problems) -> None:
    """An export keeps every stored message; imported into a fresh stream, the gate judges each as before."""
    path = workdir / "fuzz-export.jsonl"
    with path.open("w", encoding="utf-8") as out:
        written = await export_log(live, out)
    if written != await live.head():
        problems.append(f"the export holds {written} of the log's {await live.head()} messages")
    gate = await gate_for(live)
    with EmbeddedNats(workdir / "import-nats") as server:
        imported = ClaimLog(await connect(server.url_for("admin")), StreamSpec("CLAIMS"))
        try:
            await imported.ensure()
            await import_file(imported, path)
            before, after = InOrder(gate), InOrder(gate)  # the same keys judge both: the pure part of the gate
            again = {stored.seq: stored for stored in await _all(imported)}
            for stored in await _all(live):
                copy = again.get(stored.seq)
                was, now = before.admit(stored), after.admit(copy) if copy is not None else None
                if now is None or isinstance(was, Admitted) != isinstance(now, Admitted):
                    problems.append(f"sequence {stored.seq} imported: {_said(was)} before, {_said(now)} after")
        finally:
            await imported.nc.close()


def _said(verdict: Any) -> str:
    return "missing" if verdict is None else "admitted" if isinstance(verdict, Admitted) else f"refused ({verdict.reason[:80]})"


def _mapped(seqs: dict[int, int], point: int) -> int:
    """The clean log's sequence standing for ``point`` of the live log: its last admitted event at or before it."""
    return max((clean for seq, clean in seqs.items() if seq <= point), default=0)


async def _same_page(live: ClaimLog, clean: ClaimLog, claim: str, mine: AsOf, theirs: AsOf, renumber, problems: Problems) -> None:
    page, expected = await page_json_as_of(live, claim, mine), await page_json_as_of(clean, claim, theirs)
    shown = None if page is None else json.dumps(_renumbered(json.loads(page), renumber), sort_keys=True)
    wanted = None if expected is None else json.dumps(json.loads(expected), sort_keys=True)
    if shown != wanted:
        problems.append(f"{claim} as of {mine} differs from the admitted events' page as of {theirs}: {str(shown)[:200]} / {str(wanted)[:200]}")


def _same_history(claim: str, mine: list[StoredEvent], theirs: list[StoredEvent], gate: Gate, clean_gate: Gate, renumber, problems: Problems) -> None:
    entries, expected = claim_history(claim, mine, gate=gate) or [], claim_history(claim, theirs, gate=clean_gate) or []
    if acted := [e.seq for e in entries if e.unreadable and (e.actor is not None or e.event_id is not None)]:
        problems.append(f"{claim}'s history shows refused events as acts: {acted[:5]}")
    shown = [(renumber(e.seq), e.type, e.event_id, e.actor, e.revision, e.diff) for e in entries if not e.unreadable]
    if shown != [(e.seq, e.type, e.event_id, e.actor, e.revision, e.diff) for e in expected]:
        problems.append(f"{claim}'s history differs from the admitted events' history")


def _same_state(claim: str, mine: list[StoredEvent], theirs: list[StoredEvent], gate: Gate, clean_gate: Gate, renumber, problems: Problems) -> None:
    state, expected = claim_state(claim, mine, gate), claim_state(claim, theirs, clean_gate)
    if mine and state.head_seq != mine[-1].seq:
        problems.append(f"{claim}: the write side expects sequence {state.head_seq}, the claim's last message is {mine[-1].seq}")
    if _decisive(state, renumber) != _decisive(expected, lambda seq: seq):
        problems.append(f"{claim}: the write side's state differs from the admitted events' state")


def _decisive(state: ClaimState, renumber) -> tuple:
    """What a decision looks at (not where the claim's history ends, which counts refused messages too)."""
    written = {event_id: (renumber(w.seq), w.event) for event_id, w in state.written.items()}
    return (state.drafted, state.drafted_by, state.lifecycle, state.revision, state.sources, state.disagreements, state.reviews,
            state.related, written)


async def _all(claim_log: ClaimLog) -> list[StoredEvent]:
    found, after, head = [], 0, await claim_log.head()
    while after < head:
        page = await claim_log.read_log(after_seq=after, limit=1000)
        if not page:
            break
        found.extend(page)
        after = page[-1].seq
    return found
