"""An honest restore yields the same tree: the backup keeps the tree's record and checkpoint, the tiles are rehashed."""

from __future__ import annotations

from pathlib import Path

from services.audit.backup import backup, restore
from services.log import ClaimLog, StreamSpec, connect
from services.log.tlog_store import TlogStore
from services.tlog.tree import checkpoint_of, consistency
from tests.integration.test_auditor import grow
from tlog.proofs import verify_consistency


async def test_a_restored_registry_continues_its_tree_with_the_same_root(shared_nats, tmp_path: Path):
    source, target = await connect(shared_nats.take()), await connect(shared_nats.take())
    try:
        source_log = ClaimLog(source, StreamSpec("CLAIMS"))
        await source_log.ensure()
        await grow(source_log, 40)
        store = await TlogStore.open(source, "CLAIMS")
        signed = checkpoint_of((await store.checkpoint())[0], await store.tree())
        made = await backup(source_log, tmp_path / "backup")
        assert "claimlog_tlog" in made.buckets  # the tree's record and its last checkpoint travel with the log

        target_log = ClaimLog(target, StreamSpec("CLAIMS"))
        await target_log.ensure()
        await restore(target_log, tmp_path / "backup", replicas=1, data_dir=tmp_path / "data")
        await grow(target_log, 0)  # the integrator on the restored registry: the tiles rehashed from the log
        restored = await TlogStore.open(target, "CLAIMS")
        again = checkpoint_of((await restored.checkpoint())[0], await restored.tree())
        assert (again.size, again.root) == (signed.size, signed.root)
        await grow(target_log, 5)
        later = checkpoint_of((await restored.checkpoint())[0], await restored.tree())
        verify_consistency(40, 45, signed.root, later.root, await consistency(restored, 40, 45))
    finally:
        await source.close()
        await target.close()
