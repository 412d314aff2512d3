"""What browsers are told, through the real app on SQLite and PostgreSQL: every answer is nosniff and may not
be framed, the pages allow scripts and styles from the API only, CORS is off unless origins are configured,
and the API docs load nothing from outside."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import ValidationError

from services.http.app import attach_log
from services.http.server import build_app
from services.read_api.browser import Cors
from services.runtime.settings import Settings
from services.store.generations import Generations
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

FRONTEND = "https://registry-frontend.example"
ELSEWHERE = "https://elsewhere.example"


def directives(policy: str) -> dict[str, list[str]]:
    """A Content-Security-Policy as {directive: sources}."""
    parts = (part.split() for part in policy.split(";") if part.strip())
    return {name: sources for name, *sources in parts}


async def drafted(api: Api) -> str:
    claim = random_claim_id()
    seq = (await api.send("draft_claim", "ada", **draft(claim))).json()["last_seq"]
    await api.page(claim, after=seq)
    return claim


async def test_every_answer_is_nosniff_unframeable_and_under_a_policy(api: Api):
    claim = await drafted(api)
    answers = [
        await api.http.get("/claims"),
        await api.http.get(f"/claims/{claim}"),
        await api.http.get("/claims/CLM-99999999"),
        await api.http.get("/claims", params={"limit": 0}),
        await api.http.get(f"/pages/claims/{claim}"),
        await api.http.get("/pages/claims"),
        await api.http.get("/pages/scorecard"),
        await api.http.get("/static/style.css"),
        await api.http.get("/health"),
        await api.http.get("/metrics"),
        await api.http.get("/no-such-route"),
        await api.http.post("/commands/draft_claim", json=draft(random_claim_id())),  # no token: 401
        # Refused by the body limits before any route: too deep (422), too large (413).
        await api.http.post("/commands/draft_claim", content=b"[" * 100, headers={"Content-Type": "application/json"}),
        await api.http.post("/commands/draft_claim", content=b" " * 2_000_000, headers={"Content-Type": "application/json"}),
    ]
    assert {answer.status_code for answer in answers} >= {200, 401, 404, 413, 422}
    for answer in answers:
        where = f"{answer.request.method} {answer.request.url.path} -> {answer.status_code}"
        assert answer.headers["x-content-type-options"] == "nosniff", where
        assert answer.headers["x-frame-options"] == "DENY", where
        policy = directives(answer.headers["content-security-policy"])
        assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"], where


async def test_the_pages_run_scripts_and_styles_from_the_api_only_and_inline_none(api: Api):
    claim = await drafted(api)
    for path in (f"/pages/claims/{claim}", "/pages/claims", "/pages/scorecard", "/pages/claims/CLM-99999999"):
        page = await api.http.get(path)
        assert page.headers["content-type"].startswith("text/html"), path
        policy = directives(page.headers["content-security-policy"])
        assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"], policy
        assert policy["default-src"] == ["'self'"] and policy["base-uri"] == ["'none'"], policy
        # No inline script: at most the app's own live.js, by URL (the listing and error pages have none).
        assert set(re.findall(r"<script[^>]*>", page.text)) <= {'<script src="/static/live.js" defer>'}, path
        assert "<style" not in page.text and " style=" not in page.text, path
        assert '<link rel="stylesheet" href="/static/style.css">' in page.text, path
    live = await api.http.get("/static/live.js")
    assert live.status_code == 200 and "EventSource" in live.text
    stylesheet = await api.http.get("/static/style.css")
    assert stylesheet.status_code == 200 and stylesheet.headers["content-type"].startswith("text/css")
    assert "text-decoration" in stylesheet.text


async def test_cors_is_off_by_default(api: Api):
    preflight = await api.http.options(
        "/commands/draft_claim",
        headers={"Origin": FRONTEND, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"},
    )
    assert not any(name.startswith("access-control-") for name in preflight.headers), preflight.headers
    read = await api.http.get("/claims", headers={"Origin": FRONTEND})
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers


@pytest.fixture
async def cors_api(
    api: Api, settings: Settings, generations: Generations, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[httpx.AsyncClient]:
    """The app as ``claimlog api`` builds it, with CORS configured through CLAIMLOG_CORS_ALLOW_ORIGINS, on the
    test's log and database (attached here: the transport does not run the app's lifespan)."""
    monkeypatch.setenv("CLAIMLOG_CORS_ALLOW_ORIGINS", f"{FRONTEND}, http://localhost:5173")
    configured = Settings(nats_url=settings.nats_url, database_url=settings.database_url, data_dir=settings.data_dir)
    app = build_app(configured, generations)
    attach_log(app, api.log)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://claimlog") as http:
        yield http


async def test_configured_origins_get_cors_and_others_do_not(cors_api: httpx.AsyncClient, api: Api):
    asked = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, if-match"}
    allowed = await cors_api.options("/commands/draft_claim", headers={"Origin": FRONTEND, **asked})
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers["access-control-allow-origin"] == FRONTEND
    assert {"GET", "POST"} <= set(allowed.headers["access-control-allow-methods"].replace(" ", "").split(","))
    assert {"authorization", "content-type", "if-match"} <= set(
        allowed.headers["access-control-allow-headers"].lower().replace(" ", "").split(",")
    )
    assert allowed.headers["x-content-type-options"] == "nosniff"

    refused = await cors_api.options("/commands/draft_claim", headers={"Origin": ELSEWHERE, **asked})
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers
    not_allowed_method = await cors_api.options("/claims", headers={"Origin": FRONTEND, "Access-Control-Request-Method": "DELETE"})
    assert not_allowed_method.status_code == 400

    claim = random_claim_id()
    write = await cors_api.post(
        "/commands/draft_claim", json=draft(claim), headers={"Origin": FRONTEND, "Authorization": f"Bearer {api.tokens['ada']}"}
    )
    assert write.status_code == 201, write.text
    assert write.headers["access-control-allow-origin"] == FRONTEND
    assert {"etag", "location"} <= set(write.headers["access-control-expose-headers"].lower().replace(" ", "").split(","))
    other = await cors_api.get("/claims", headers={"Origin": ELSEWHERE})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


def test_cors_settings_take_commas_or_json_and_refuse_an_origin_with_a_path(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLAIMLOG_CORS_ALLOW_ORIGINS", '["https://a.example", "http://localhost:3000"]')
    monkeypatch.setenv("CLAIMLOG_CORS_ALLOW_METHODS", "GET")
    cors = Cors.from_settings(Settings())
    assert cors.origins == ("https://a.example", "http://localhost:3000") and cors.methods == ("GET",)
    monkeypatch.delenv("CLAIMLOG_CORS_ALLOW_ORIGINS")
    assert Cors.from_settings(Settings()).origins == ()  # none unless configured
    for wrong in ("https://a.example/", "a.example", "https://a.example/app"):
        monkeypatch.setenv("CLAIMLOG_CORS_ALLOW_ORIGINS", wrong)
        with pytest.raises(ValidationError, match="cors_allow_origins"):
            Settings()


LOCAL_URL = re.compile(r"""(?:src|href)="([^"]+)"|url: '([^']+)'""")


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_the_api_docs_load_only_files_the_api_serves(api: Api, path: str):
    page = await api.http.get(path)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "://" not in page.text, page.text  # no CDN, no fonts from elsewhere
    referenced = [src or url for src, url in LOCAL_URL.findall(page.text)]
    assert "/openapi.json" in referenced or "/openapi.json" in page.text
    scripts = [url for url in referenced if url.endswith(".js")]
    assert scripts and all(url.startswith("/static/docs/") for url in scripts), referenced
    for url in {*referenced, "/openapi.json"}:
        asset = await api.http.get(url)
        assert asset.status_code == 200 and len(asset.content) > 100, (url, asset.status_code)
    policy = directives(page.headers["content-security-policy"])
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"], policy
    assert policy["frame-ancestors"] == ["'none'"]
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.S)
    hashes = [f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" for body in inline]
    assert policy["script-src"] == ["'self'", *hashes], policy  # its own start-up script runs, nothing else inline


async def test_the_asyncapi_page_loads_its_component_from_the_api_itself_and_runs_only_its_own_inline_code(api: Api):
    """AsyncAPI's React component is served by the API, as /docs serves Swagger UI: the page loads nothing from elsewhere."""
    page = await api.http.get("/asyncapi")
    assert page.status_code == 200
    policy = directives(page.headers["content-security-policy"])
    inline = re.findall(r"<script>(.*?)</script>", page.text, re.S)
    assert len(inline) == 1
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert policy["script-src"] == ["'self'", f"'sha256-{digest}'"], policy
    loaded = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert loaded and all(url.startswith("/") for url in loaded), loaded
    for url in loaded:
        asset = await api.http.get(url)
        assert asset.status_code == 200 and len(asset.content) > 10_000, (url, asset.status_code)
    assert "'unsafe-inline'" not in policy["style-src"] and policy["frame-ancestors"] == ["'none'"], policy
