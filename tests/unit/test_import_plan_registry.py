"""An import's plan judges an export by the key registry it brings in its own changes: each event folds or is
refused where it is imported as it did where it was exported; without them, by the importing registry's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from events import encode
from events.envelope import new_event_id
from events.key_registry import SigningRequired, encode_change
from events.subjects import DEFAULT_LAYOUT, REGISTRY
from services.audit.export import ImportRefused, export_line
from services.audit.import_plan import check_attributable
from services.identity.keys import KeyDocument
from services.log.reader import StoredEvent
from tests.builders import drafted

AT = datetime(2026, 12, 7, 11, 0, tzinfo=UTC)


def _export(path: Path) -> Path:
    """A draft, the requirement after it, and an unsigned draft after the requirement (refused where it was)."""
    messages = [
        (DEFAULT_LAYOUT.stored_subject("CLM-0001", "ClaimDrafted"), encode(drafted("CLM-0001"))),
        (DEFAULT_LAYOUT.stored_subject(REGISTRY, "SigningRequired"),
         encode_change(SigningRequired(event_id=new_event_id(), occurred_at=AT, required_after=1))),
        (DEFAULT_LAYOUT.stored_subject("CLM-0002", "ClaimDrafted"), encode(drafted("CLM-0002"))),
    ]
    lines = [export_line(StoredEvent(seq, subject, AT, data, msg_id=None)) for seq, (subject, data) in enumerate(messages, start=1)]
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_an_export_bringing_its_own_registry_is_planned_as_it_was_and_its_changes_are_not_unsigned_events(tmp_path: Path):
    plan = check_attributable(_export(tmp_path / "log.jsonl"), KeyDocument(required_after=1), own=True)
    assert (plan.events, plan.unsigned, plan.required_after) == (2, 1, 1)


def test_an_export_judged_by_another_registrys_requirement_is_refused_naming_the_late_unsigned_event(tmp_path: Path):
    with pytest.raises(ImportRefused, match=r"1 events of .* are unsigned and would be stored at sequences after 1 \(the first at 3\)"):
        check_attributable(_export(tmp_path / "log.jsonl"), KeyDocument(required_after=1))
