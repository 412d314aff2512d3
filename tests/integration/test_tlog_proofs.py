"""Inclusion proofs as an API process serves them at a high rate: from the tiles the process keeps."""

from __future__ import annotations

from services.log import ClaimLog
from services.tlog.published import PublishedLog
from tests.integration.audit_log import integrate
from tests.integration.test_tlog_integrator import append_drafts
from tlog.note import Ed25519Signer

ORIGIN = "registry.test/proved"

async def test_proofs_read_the_tiles_a_process_keeps_not_the_store_each_time(claim_log: ClaimLog):
    """An API process answers many proofs of one tree: the tiles a proof needs are read from the store once."""
    await append_drafts(claim_log, 300)
    await integrate(claim_log.nc, Ed25519Signer.generate(ORIGIN))
    published = PublishedLog(claim_log.nc, "CLAIMS")
    store = await published.store()
    reads, read = [], store.tile

    async def counted(path: str) -> bytes:
        reads.append(path)
        return await read(path)

    store.tile = counted
    first = await published.proof(7)
    assert first is not None and reads
    before = len(reads)
    assert await published.proof(7) == first and await published.proof(9) is not None
    assert len(reads) == before  # the second and third proofs read every tile from the process's own
