"""The progress bars of ``claimlog import`` and ``claimlog verify`` know their totals and end full."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from projections.registry import build_projections
from services.log import ClaimLog
from services.projector.runner import Runner, Scope
from services.projector.writer import CheckpointedWriter
from services.runtime.embedded import EmbeddedNats
from tests.integration.audit_log import claimlog, project, write_claims


@pytest.fixture
def empty_nats(tmp_path: Path) -> Iterator[str]:
    """A second nats-server with an empty store, to import into."""
    server = EmbeddedNats(tmp_path / "nats-empty", sync="always")
    server.start()
    yield server.url_for("admin")
    server.stop()


def bar(output: str, name: str) -> tuple[str, str]:
    """The last counts a bar showed: (done, total)."""
    shown = re.findall(rf"^{name}\b.*?(\d+|\?)/(\d+|\?)", output, re.MULTILINE)
    assert shown, output
    return shown[-1]


async def test_the_import_and_replay_bars_end_at_the_number_of_events(
    nats_url: str, empty_nats: str, claim_log: ClaimLog, engine: Engine, database_url: str, tmp_path: Path
):
    await write_claims(claim_log, count=6)
    head = await project(claim_log, engine)
    exported = tmp_path / "log.jsonl"
    assert claimlog("export", "--out", str(exported), nats_url=nats_url, cwd=tmp_path).returncode == 0

    imported = claimlog("import", str(exported), nats_url=empty_nats, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert bar(imported.stderr, "import") == (str(head), str(head))

    verified = claimlog("verify", nats_url=nats_url, database_url=database_url, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert bar(verified.stderr, "replay") == (str(head), str(head))


async def project_each_partition(claim_log: ClaimLog, engine: Engine) -> int:
    """Fold the log as projector workers do, each partition with its own checkpoint; returns the head."""
    head = await claim_log.head()
    last = {claim_log.layout.partition_of_subject(s.subject): s.seq for s in await claim_log.read_log(after_seq=0, limit=head)}
    writer = CheckpointedWriter(engine, build_projections(), partitions=claim_log.layout.partitions)
    for partition, seq in sorted(last.items()):
        runner = Runner(claim_log, writer, name=f"p{partition}", batch=7, scope=Scope(partition=partition))
        runner.load_checkpoint()
        await runner.run_until(seq)
    return head


async def test_the_replay_reports_events_replayed_over_all_partitions_ending_at_all_of_them(claim_log: ClaimLog, engine: Engine):
    from services.audit.rebuild import compare_read_models, live_checksums
    from services.audit.verify import Report

    await write_claims(claim_log, count=6)
    head = await project_each_partition(claim_log, engine)
    positions, _ = live_checksums(engine)
    assert positions is not None and positions.partitions == claim_log.layout.partitions > 1  # one replay a partition
    reported: list[int] = []
    report = Report()
    await compare_read_models(claim_log, engine, report, progress=reported.append)
    assert report.ok and report.tables_at_seq == head
    assert reported[-1] == head and reported == sorted(reported)
