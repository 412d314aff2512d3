"""A log written before partitions moves into a partitioned stream: same order, bytes, sequences and store times; verify clean."""

from __future__ import annotations

from pathlib import Path

from events.subjects import LogLayout
from services.audit.export import export_log, import_file
from services.audit.verify import Report, check_log
from services.log import ClaimLog, StreamSpec, connect
from tests.builders import attached, drafted, withdrawn
from tests.conftest import random_claim_id


async def test_an_unpartitioned_log_exported_and_imported_into_partitions_is_the_same_log(nats_url: str, tmp_path: Path):
    nc = await connect(nats_url)
    try:
        old = ClaimLog(nc, StreamSpec("CLAIMS", layout=LogLayout("claims", 0)))
        await old.ensure()
        claims = [random_claim_id() for _ in range(12)]
        for claim in claims:
            await old.append(claim, [drafted(claim), attached(claim, "s1")], expected_seq=0, prev_hash=None)
        for claim in claims[::3]:
            head = await old.claim_head(claim)
            await old.append(claim, [withdrawn(claim, "s1")], expected_seq=head.seq, prev_hash=head.hash)
        exported = tmp_path / "log.jsonl"
        with exported.open("w") as out:
            await export_log(old, out)

        new = ClaimLog(nc, StreamSpec("CLAIMS2", layout=LogLayout("claims2", 16)))
        await new.ensure()
        imported = await import_file(new, exported)
        assert not imported.renumbered

        for claim in claims:
            before, after = await old.read_claim(claim), await new.read_claim(claim)
            assert [(s.seq, s.data, s.stored_at, s.msg_id) for s in after] == [(s.seq, s.data, s.stored_at, s.msg_id) for s in before]
            assert {s.subject for s in before} == {f"claims.{claim}.{s.event.type}" for s in before}
            assert {s.subject for s in after} == {new.layout.stored_subject(claim, s.event.type) for s in after}
        report = Report()
        await check_log(new, report, head=await new.head())
        assert report.ok and report.events == await old.head()
    finally:
        await nc.close()
