"""The projector's side of the contract's rules (events/rules.py): each event of a batch judged against its
claim's events folded before it, as every reader's gate judges it (services/admission/in_order.py).

The gate admits a batch's messages one by one, without their claims (``to_entries`` needs no database);
the claims' facts come here, in the batch's transaction, from their pages as the claim-pages projection
holds them: the fold of the claim's admitted events. A writer without that projection (a rebuild of
other projections alone, which folds from the log's first event) keeps the facts of the claims it folded.

The rules are judged in the same pass as repeats (``without_repeats``), in log order: an event the rules
refuse is no act of its actor, so its id stays free and a later event with it is judged afresh, as a
claim's reader judges it. A parked claim's page is behind its events: they are judged when ``claimlog
parked retry`` applies them, and those of a claim released meanwhile once the batch finds it released.
An event against the rules goes to ``unreadable_events`` with its reason, and no projection sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from sqlalchemy import Connection

from events.rules import ClaimFacts
from projections.base import Projection, Record
from projections.claim_pages import ClaimPagesProjection
from services.admission import Admitted, Refused, within_rules
from services.projector.repeats import Judge, unfolded

log = logging.getLogger(__name__)


class RuleCheck:
    """Judges a writer's batches by the rules, its claims' facts read from ``projections``' claim pages."""

    def __init__(self, projections: Sequence[Projection]) -> None:
        self._pages = next((p for p in projections if isinstance(p, ClaimPagesProjection)), None)
        self._kept: dict[str, ClaimFacts] = {}  # without the pages: the facts of every claim folded
        self._pending: dict[str, ClaimFacts] = {}  # the batch's, kept once it commits

    def judges(self, conn: Connection, records: Sequence[Record], *, later: Collection[str] = ()) -> Callable[[], Judge]:
        """Judges of the batch's records: each call a fresh one, from the claims' facts before the batch.
        A claim in ``later`` (parked) is not judged here."""
        before = self._facts(conn, list(dict.fromkeys(r.event.claim_id for r in records if r.event.claim_id not in later)))

        def judge_pass() -> Judge:
            facts = {claim_id: claim.copy() for claim_id, claim in before.items()}
            if self._pages is None:
                self._pending.update(facts)  # a later pass over the same claims replaces an earlier one
            return lambda record: _judged(facts.get(record.event.claim_id), record)

        return judge_pass

    def judge(self, conn: Connection, records: Sequence[Record], subjects: Mapping[int, str]) -> tuple[list[Record], list[dict]]:
        """The records that keep the rules, in order; and the ``unreadable_events`` rows of those that do not
        (a parked claim's events, judged as they are applied at last)."""
        if not records:
            return [], []
        judge = self.judges(conn, records)()
        kept, rows, refused = [], [], []
        for record in records:
            reason = judge(record)
            if reason is None:
                kept.append(record)
                continue
            refused.append(record)
            rows.append({"seq": record.seq, "subject": subjects[record.seq], "reason": reason})
            log.error("event at sequence %s (%s) refused: %s", record.seq, subjects[record.seq], reason)
        unfolded(conn, refused)
        return kept, rows

    def committed(self) -> None:
        """The batch judged last is in the tables: its claims' facts stand."""
        self._kept.update(self._pending)
        self._pending = {}

    def forget(self) -> None:
        """The batch judged last rolled back."""
        self._pending = {}

    def _facts(self, conn: Connection, claim_ids: list[str]) -> dict[str, ClaimFacts]:
        if self._pages is not None:
            return self._pages.facts(conn, claim_ids)
        return {c: self._kept[c].copy() if c in self._kept else ClaimFacts(c) for c in claim_ids}


def _judged(facts: ClaimFacts | None, record: Record) -> str | None:
    """Why ``record`` breaks a rule on a claim with ``facts`` (folded into them when it does not); None
    also for a claim not judged here."""
    if facts is None:
        return None
    verdict = within_rules(facts, Admitted(record.seq, "", record.at, record.event))
    if isinstance(verdict, Refused):
        return verdict.reason
    facts.fold(record.event)
    return None
