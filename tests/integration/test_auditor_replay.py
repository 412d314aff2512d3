"""`claimlog audit --compare`: the auditor folds the log's public entries with the registry's own admission and
folds into a SQLite of its own, and compares what the registry serves as of the checkpoint with it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine

from events import Actor, encode
from services.auditor.client import LogClient
from services.auditor.errors import NotComparable
from services.auditor.run import run_audit
from services.http.app import attach_log, create_app
from services.identity.keys import KeyRing
from services.log import ClaimLog
from services.log.reader import ClaimReader
from services.log.signing import Signer
from services.read_api import queries
from tests.builders import PERSON, drafted, filed
from tests.conftest import random_claim_id
from tests.integration.audit_log import integrate, project, publish_raw, write_claims
from tlog.note import Ed25519Signer

LOG = Ed25519Signer("registry.test/replayed", bytes(range(32)))
API = Actor(id="claimlog-api", kind="service")


def registry(claim_log: ClaimLog, engine: Engine) -> LogClient:
    """The registry's read API over ``engine`` and its log, reached over HTTP as an outsider reaches it."""
    app = create_app(engine)
    attach_log(app, claim_log)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://registry")
    return LogClient("http://registry", per_second=10_000, http=http)


async def audited(client, directory: Path, **options):
    return await run_audit("http://registry", directory, key=LOG.vkey(), witnesses=(), per_second=10_000,
                           progress=lambda *_: None, say=lambda _: None, client=client, compare_pages=True, **options)


async def test_an_honest_registry_serves_every_page_and_the_scorecard_as_its_entries_fold(claim_log: ClaimLog, engine: Engine, tmp_path: Path):
    claims = await write_claims(claim_log, 6)
    await project(claim_log, engine)
    await integrate(claim_log.nc, LOG)
    report = await audited(registry(claim_log, engine), tmp_path)
    comparison = report.comparison
    assert comparison is not None and comparison.size == await claim_log.head()
    assert comparison.differences == [], [str(d) for d in comparison.differences]
    assert (comparison.claims_compared, comparison.claims_in_log) == (len(claims), len(claims))

    sampled = await audited(registry(claim_log, engine), tmp_path, sample=2)
    assert sampled.comparison.claims_compared == 2 and sampled.comparison.differences == []


async def test_a_page_served_otherwise_than_the_entries_fold_is_listed_with_the_field_and_both_values(
    claim_log: ClaimLog, engine: Engine, tmp_path: Path
):
    claims = await write_claims(claim_log, 3)
    await project(claim_log, engine)
    await integrate(claim_log.nc, LOG)
    served = altered(registry(claim_log, engine), f"/claims/{claims[1]}?", claim="a statement the log never held")
    comparison = (await audited(served, tmp_path)).comparison
    assert [d.what for d in comparison.differences] == [f"claim {claims[1]}"]
    said = str(comparison.differences[0])
    assert "claim: served a statement the log never held" in said and "folded" in said


async def test_a_log_rewritten_behind_its_transparency_log_serves_pages_the_public_entries_do_not_give(
    claim_log: ClaimLog, engine: Engine, tmp_path: Path
):
    claims = await write_claims(claim_log, 3)
    await integrate(claim_log.nc, LOG)
    js = claim_log.nc.jetstream()
    async with ClaimReader(claim_log.nc, "CLAIMS") as reader:
        kept = await reader.read_log(after_seq=0, limit=1000)
    changed = next(n for n, m in enumerate(kept) if m.subject.endswith("ClaimDrafted") and m.subject.split(".")[-2] == claims[1])
    # The operator re-creates the stream with one draft's statement changed, and keeps the published tree.
    config = (await js.stream_info("CLAIMS")).config
    await _rewrite(claim_log, config, kept, changed)
    await project(claim_log, engine)
    comparison = (await audited(registry(claim_log, engine), tmp_path)).comparison
    # The registry no longer folds that draft as the tree holds it: its page and the scorecard it counted in differ, no other page.
    assert {d.what for d in comparison.differences} == {f"claim {claims[1]}", "scorecard"}, [str(d) for d in comparison.differences]


def altered(served: LogClient, prefix: str, **fields: object) -> LogClient:
    """``served`` answering every path that starts with ``prefix`` with ``fields`` set in its body: a registry
    that serves something else than it folded."""
    honest = served.json

    async def dishonest(path: str):
        status, body = await honest(path)
        if path.startswith(prefix):
            body.update(fields)
        return status, body

    served.json = dishonest
    return served


async def _rewrite(claim_log: ClaimLog, config, kept, changed: int) -> None:
    """Delete and re-create the claim stream with message ``changed``'s statement rewritten; the transparency
    log's bucket and tiles stay as the integrator left them."""
    from services.log.connection import RESTORED_TIME

    js = claim_log.nc.jetstream()
    await js.delete_stream("CLAIMS")
    await js.add_stream(config)
    for n, message in enumerate(kept):
        data = message.data
        if n == changed:
            body = json.loads(data)
            body["claim"] = "a statement rewritten by the operator"
            data = json.dumps(body, separators=(",", ":")).encode()
        headers = {RESTORED_TIME: message.stored_at.isoformat().replace("+00:00", "Z")}
        if message.msg_id:
            headers["Nats-Msg-Id"] = message.msg_id
        claim, event_type = message.subject.split(".")[-2:]
        await js.publish(f"claims.{claim}.{event_type}", data, headers=headers)


async def test_a_registry_counting_by_other_rules_is_refused_not_compared(claim_log: ClaimLog, engine: Engine, tmp_path: Path):
    await write_claims(claim_log, 2)
    await project(claim_log, engine)
    await integrate(claim_log.nc, LOG)
    served = altered(registry(claim_log, engine), "/scorecard", rules_version=999)
    with pytest.raises(NotComparable, match="rules version 999"):
        await audited(served, tmp_path)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_signed_entries_without_a_key_registry_in_the_log_are_not_compared(claim_log: ClaimLog, engine: Engine, tmp_path: Path):
    signed = ClaimLog(claim_log.nc, claim_log.spec, signer=Signer.generate())
    claim = random_claim_id()
    await signed.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
    await project(claim_log, engine)
    await integrate(claim_log.nc, LOG)
    with pytest.raises(NotComparable, match="entry 0 is signed"):
        await audited(registry(claim_log, engine), tmp_path)


async def test_a_signed_registry_is_replayed_with_the_key_registry_its_entries_hold_and_a_forgery_folds_on_neither_side(
    claim_log: ClaimLog, engine: Engine, nats_url: str, tmp_path: Path
):
    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    api, _ = await ring.add(API, delegate=True)
    await ring.require(await claim_log.head())
    signed = ClaimLog(claim_log.nc, claim_log.spec, signer=api)
    claims = await write_claims(signed, 3)
    forged = filed(claims[0], "forged-1", actor=PERSON)  # unsigned, "by" a person, past the requirement
    head = await signed.claim_head(claims[0])
    await publish_raw(nats_url, f"claims.{claims[0]}.DisagreementFiled", encode(forged.model_copy(update={"prev_hash": head.hash})))
    await project(claim_log, engine)
    await integrate(claim_log.nc, LOG)
    comparison = (await audited(registry(claim_log, engine), tmp_path)).comparison
    assert comparison.differences == [], [str(d) for d in comparison.differences]
    assert comparison.claims_compared == len(claims)
    with engine.connect() as conn:  # the registry refused the forgery, and so did the replay, or the pages would differ
        assert "forged-1" not in queries.claim_page_json(conn, claims[0])[0].decode()
