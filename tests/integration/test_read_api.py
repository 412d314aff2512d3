"""The read API over projected read models (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from services.http import create_app
from services.ingest.pages import import_page, read_page, sample_pages
from services.log import ClaimLog
from tests.integration.test_projector import append_history, project_all


@pytest.fixture
async def samples(claim_log: ClaimLog, engine: Engine) -> TestClient:
    for path in sample_pages():
        await import_page(claim_log, read_page(path))
    await project_all(claim_log, engine)
    return TestClient(create_app(engine))


async def test_a_claim_page_shows_what_the_registry_page_says(samples: TestClient):
    page = read_page(next(p for p in sample_pages() if p.stem == "CLM-0338"))
    body = samples.get("/claims/CLM-0338").json()
    assert body["statement"] == page.statement
    assert body["capability"] == page.capability
    assert body["observed_on"] == page.observed_on
    assert [(s["relation"], s["measured"], s["breadth"]) for s in body["sources"]] == [
        (s.relation, s.measured, s.breadth) for s in page.sources
    ]
    # The page does not say who brought its source: it says where it was imported from, and by whom.
    assert body["sources"][0]["brought"]["by"] == {"id": "claimlog-ingest", "kind": "service", "model": None}
    assert body["sources"][0]["imported_from"] == "CLM-0338.txt"
    # Nor who drafted it, but that a model did: the page's word, beside the importer.
    assert body["notes"]["drafted"]["by"] == {"id": "claimlog-ingest", "kind": "service", "model": None}
    assert body["notes"]["drafted_by"] == {"kind": "model", "model": None}
    assert [r["statement"] for r in body["related"]] == [r.statement for r in page.related]
    assert body["notes"]["drafted_confidence"] == "low"
    assert body["notes"]["falsifier_as_drafted"] == page.falsifier
    assert body["status"]["unreviewed_model_draft"] is True
    assert body["status"]["counts_toward_scorecard"] is False


async def test_related_claims_resolve_to_pages_that_exist(samples: TestClient):
    related = samples.get("/claims/CLM-0338").json()["related"]
    resolved = {r["claim_id"] for r in related if r["claim_id"]}
    assert resolved == {"CLM-0501", "CLM-0631"}
    assert sum(1 for r in related if r["claim_id"] is None) == 3


async def test_a_claim_is_found_by_its_slug(samples: TestClient):
    body = samples.get("/claims/rl-training-central-agent-multi-agent-harness-1-5b-3b-qwen2-5-backbones").json()
    assert body["claim_id"] == "CLM-0631"


async def test_an_unknown_claim_is_a_404_that_says_so(samples: TestClient):
    response = samples.get("/claims/CLM-9999")
    assert response.status_code == 404
    assert response.json() == {"error": "claim_not_found", "message": "no claim 'CLM-9999'"}


async def test_the_listing_pages_through_every_claim_with_a_cursor(claim_log: ClaimLog, engine: Engine):
    claims = sorted(f"CLM-{n:04d}" for n in range(1000, 1025))
    for claim_id in claims:
        await append_history(claim_log, claim_id)
    await project_all(claim_log, engine)
    client = TestClient(create_app(engine))
    seen, cursor = [], None
    while True:
        body = client.get("/claims", params={"limit": 10, **({"cursor": cursor} if cursor else {})}).json()
        seen += [item["claim_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == claims
    assert body["items"][-1]["sources_withdrawn"] == 1


async def test_a_forged_cursor_is_refused_with_a_reason(samples: TestClient):
    response = samples.get("/claims", params={"cursor": "bm90LWEtY2xhaW0"})
    assert response.status_code == 400
    assert response.json()["error"] == "bad_cursor"


async def test_health_reports_how_far_the_projections_have_read(samples: TestClient, claim_log: ClaimLog):
    body = samples.get("/health").json()
    assert body["status"] == "ok"
    assert body["projections"]["claim_pages"] == await claim_log.head()


async def test_the_openapi_document_describes_the_claim_page(samples: TestClient):
    spec = samples.get("/openapi.json").json()
    assert "/claims/{claim_key}" in spec["paths"]
    assert "ClaimPage" in spec["components"]["schemas"]
    assert samples.get("/docs").status_code == 200


@pytest.mark.parametrize("name", ["CLM-0338", "CLM-0501", "CLM-0631"])
async def test_an_ingested_page_renders_back_to_the_registry_text_byte_for_byte(samples: TestClient, name: str):
    original = next(p for p in sample_pages() if p.stem == name).read_text(encoding="utf-8").rstrip("\n")
    response = samples.get(f"/claims/{name}/text")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert response.text == original
