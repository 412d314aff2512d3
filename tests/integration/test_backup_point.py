"""A backup is one point of the log: its manifest's head is the last sequence of the log it holds, and a
restore names no slug whose claim the restored log does not hold, however busy the registry was."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.audit.backup import backup, restore
from services.commands import parse_command
from services.commands.service import CommandService
from services.commands.slugs import SLUGS, slug_owners
from services.identity.actors import ActorStore
from services.log import ClaimLog, StreamSpec, connect
from services.log.buckets import bucket_keys
from services.log.names import bucket_name
from services.runtime.embedded import EmbeddedNats
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, draft

WRITES = 3


class BusyLog(ClaimLog):
    """A log that another writer drafts a claim in (its slug taken through the API) each time the head is read."""

    writes = 0

    async def head(self) -> int:
        head = await super().head()
        if self.writes < WRITES:
            self.writes += 1
            claim = random_claim_id()
            command = parse_command({"command": "draft_claim", **draft(claim), "slug": f"busy-{claim.lower()}"})
            await CommandService(ClaimLog(self.nc, self.spec)).execute(command, ACTORS["ada"])
        return head


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[EmbeddedNats, EmbeddedNats]]:
    with EmbeddedNats(tmp_path / "source") as source, EmbeddedNats(tmp_path / "fresh") as fresh:
        yield source, fresh


@pytest.mark.private_nats
async def test_a_backup_taken_while_claims_are_drafted_is_one_point_of_the_log(servers, tmp_path: Path):
    source, fresh = servers
    nc = await connect(source.url_for("admin"))
    try:
        claim_log = BusyLog(nc, StreamSpec("CLAIMS"))
        await claim_log.ensure()
        service = CommandService(claim_log)
        for _ in range(4):
            claim = random_claim_id()
            await service.execute(parse_command({"command": "draft_claim", **draft(claim)}), ACTORS["ada"])
        await ActorStore.open(nc, create=True)  # the token store: a bucket the log does not derive
        made = await backup(claim_log, tmp_path / "backup")
        assert await ClaimLog(nc, StreamSpec("CLAIMS")).head() > made.head  # claims were drafted while it was taken
    finally:
        await nc.close()
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    exported = [json.loads(line)["seq"] for line in (tmp_path / "backup" / "log.jsonl").read_text().splitlines()]
    assert manifest["head"] == made.head == exported[-1] and manifest["events"] == len(exported)
    assert all(at >= manifest["head"] for at in manifest["buckets_taken_at_head"].values())
    assert bucket_name(SLUGS) not in manifest["buckets"]  # derived from the log: rebuilt, not restored

    nc = await connect(fresh.url_for("admin"))
    try:
        restored_log = ClaimLog(nc, StreamSpec("CLAIMS"))
        await restored_log.ensure()
        done = await restore(restored_log, tmp_path / "backup", replicas=1, data_dir=tmp_path / "data")
        keys = await bucket_keys(nc.jetstream(), bucket_name(SLUGS), "slug.")
        owners = [(await slug_owners(restored_log).holder(key.removeprefix("slug."))).claim_id for key in keys]
        assert done.slugs == len(owners) == len(exported) == manifest["head"]
        for owner in owners:  # every slug's claim is in the restored log, drafted
            stored = await restored_log.read_claim(owner)
            assert stored and stored[0].event.type == "ClaimDrafted", owner
    finally:
        await nc.close()
