"""Listing and search (GET /claims) after real commands, on SQLite and PostgreSQL: filters, sort orders,
cursors, and full-text search through each database's own index."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import get_args

import pytest
from sqlalchemy import Engine

from services.read_api.listing_sql import SORT_KEYS, ClaimFilters, Sort, listing_statement
from tests.conftest import random_claim_id
from tests.integration.command_api import Api, draft

SORTS = ("id", "recent", "contested", "evidence")


@dataclass
class Registry:
    """Claims made through the command API, by name, and the log sequence that shows them all."""

    api: Api
    ids: dict[str, str]
    last: int

    async def listing(self, **params) -> dict:
        response = await self.api.http.get("/claims", params={"after": self.last, "limit": 200, **params})
        assert response.status_code == 200, response.text
        return response.json()

    async def names(self, **params) -> list[str]:
        """The names of the claims listed, in the listing's order."""
        by_id = {claim_id: name for name, claim_id in self.ids.items()}
        return [by_id[item["claim_id"]] for item in (await self.listing(**params))["items"]]

    async def send(self, command: str, who: str, name: str, **body) -> int:
        response = await self.api.send(command, who, claim_id=self.ids[name], **body)
        assert response.status_code == 201, response.text
        self.last = response.json()["last_seq"]
        return self.last


CLAIMS = {  # name: (who drafts it, statement, capability, technique)
    "plan": ("ada", "Planning before acting helps small models.", "Planning", "Plan first"),
    "agents": ("drafter", "Agents that plan their tool calls fail less often.", "Planning", None),
    "retrieval": ("ada", "Retrieval augments reasoning in large language models.", "Retrieval", None),
    "memorize": ("grace", "Small models memorize benchmark answers.", "Planning", "Plan first"),
    "retracted": ("ada", "Planning helps, in a study that was withdrawn.", "Planning", None),
    "superseded": ("ada", "Planning helps small models, said an older claim.", "Planning", None),
}


@pytest.fixture
async def registry(api: Api) -> Registry:
    """Six claims that differ on every axis the listing filters and sorts on."""
    registry = Registry(api, {name: random_claim_id() for name in CLAIMS}, 0)
    for name, (who, statement, capability, technique) in CLAIMS.items():
        body = {**draft(registry.ids[name]), "statement": statement, "capability": capability, "technique": technique}
        await registry.send("draft_claim", who, name, **{k: v for k, v in body.items() if k != "claim_id"})
    for source, relation in (("s1", "validates"), ("s2", "supports"), ("s3", "mentions")):
        await registry.send("attach_source", "bot", "plan", source_id=source, relation=relation, measured="+4 points.")
    await registry.send("attach_source", "bot", "agents", source_id="s1", relation="contradicts", measured="No gain.")
    await registry.send("record_review", "critic", "agents", review_id="r1", verdict="sound", confidence="low", revision=1)
    await registry.send("attach_source", "bot", "retrieval", source_id="s1", relation="contradicts", measured="Worse.")
    for disagreement in ("d1", "d2"):
        await registry.send("file_disagreement", "grace", "retrieval", disagreement_id=disagreement, argument="Leakage.")
    await registry.send("record_review", "grace", "retrieval", review_id="r1", verdict="sound", confidence="high", revision=1)
    await registry.send("file_disagreement", "grace", "memorize", disagreement_id="d1", argument="Too small.")
    await registry.send("resolve_disagreement", "ada", "memorize", disagreement_id="d1", outcome="rejected")
    await registry.send("attach_source", "bot", "memorize", source_id="s1", relation="contradicts", measured="No.")
    await registry.send("withdraw_source", "bot", "memorize", source_id="s1", reason="Wrong paper.")
    await registry.send("retract_claim", "ada", "retracted", reason="The study was withdrawn.")
    await registry.send("supersede_claim", "ada", "superseded", superseded_by=registry.ids["plan"])
    return registry


ACTIVE = {"plan", "agents", "retrieval", "memorize"}


async def test_retracted_and_superseded_claims_are_hidden_unless_asked_for(registry: Registry):
    assert set(await registry.names()) == ACTIVE
    assert set(await registry.names(include_closed="true")) == set(CLAIMS)
    assert await registry.names(lifecycle="retracted") == ["retracted"]
    assert set(await registry.names(lifecycle=["retracted", "superseded"])) == {"retracted", "superseded"}
    listed = {item["claim_id"]: item["lifecycle"] for item in (await registry.listing(include_closed="true"))["items"]}
    assert listed[registry.ids["superseded"]] == "superseded"


async def test_each_filter_keeps_only_the_claims_it_names(registry: Registry):
    assert set(await registry.names(capability="Planning")) == {"plan", "agents", "memorize"}
    assert set(await registry.names(technique="Plan first")) == {"plan", "memorize"}
    assert set(await registry.names(review_state="unreviewed")) == {"plan", "memorize"}
    assert await registry.names(review_state="reviewed by AI") == ["agents"]
    assert await registry.names(review_state="reviewed by a person") == ["retrieval"]
    assert await registry.names(open_disagreement="true") == ["retrieval"]
    assert set(await registry.names(open_disagreement="false")) == {"plan", "agents", "memorize"}
    assert set(await registry.names(contradicted="true")) == {"agents", "retrieval"}
    assert set(await registry.names(contradicted="false")) == {"plan", "memorize"}
    assert set(await registry.names(capability="Planning", contradicted="false", technique="Plan first")) == {"plan", "memorize"}
    before = registry.last
    await registry.send("attach_source", "bot", "plan", source_id="s4", relation="supports", measured="Again.")
    assert await registry.names(changed_since_seq=before) == ["plan"]
    assert await registry.names(changed_since_seq=registry.last) == []
    bad = await registry.api.http.get("/claims", params={"review_state": "reviewed by a cat"})
    assert bad.status_code == 422


async def test_listing_items_carry_what_a_listing_shows(registry: Registry):
    items = {item["claim_id"]: item for item in (await registry.listing())["items"]}
    retrieval = items[registry.ids["retrieval"]]
    assert (retrieval["disagreements_open"], retrieval["sources_contradicting"], retrieval["contention"]) == (2, 1, 3)
    assert retrieval["standing"] == "refuted" and retrieval["review_state"] == "reviewed by a person"
    plan = items[registry.ids["plan"]]
    assert plan["technique"] == "Plan first" and plan["sources_active"] == 3 and plan["standing"] == "validated"
    memorize = items[registry.ids["memorize"]]
    assert (memorize["sources_withdrawn"], memorize["contention"]) == (1, 0)
    assert items[registry.ids["agents"]]["unreviewed_model_draft"] is False


async def test_each_sort_puts_the_claims_in_its_order(registry: Registry):
    assert await registry.names(sort="recent") == ["memorize", "retrieval", "agents", "plan"]
    assert await registry.names(sort="contested") == ["retrieval", "agents", *sorted(
        ["plan", "memorize"], key=lambda name: registry.ids[name], reverse=True
    )]
    evidence = (await registry.listing(sort="evidence"))["items"]
    assert [item["claim_id"] for item in evidence][0] == registry.ids["plan"]
    assert [(i["sources_active"], i["claim_id"]) for i in evidence] == sorted(
        ((i["sources_active"], i["claim_id"]) for i in evidence), reverse=True
    )
    by_id = await registry.listing()
    assert by_id["sort"] == "id" and [i["claim_id"] for i in by_id["items"]] == sorted(registry.ids[n] for n in ACTIVE)
    await registry.send("file_disagreement", "grace", "plan", disagreement_id="d9", argument="One benchmark.")
    assert (await registry.names(sort="recent"))[0] == "plan"


def assert_search_index_matches_the_pages(engine: Engine) -> None:
    """SQLite: FTS5's own check that its index holds each claim page's statement, no more, no less."""
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:  # raises "database disk image is malformed" on any difference
            conn.exec_driver_sql("INSERT INTO claim_pages_search(claim_pages_search, rank) VALUES ('integrity-check', 1)")


async def test_search_finds_claims_by_the_words_of_their_statement_and_not_others(registry: Registry, engine: Engine):
    assert_search_index_matches_the_pages(engine)
    # Both engines stem: "planning" and "plan" meet, and "models" finds "models" in any form.
    assert set(await registry.names(q="planning")) == {"plan", "agents"}
    assert set(await registry.names(q="plans", include_closed="true")) == {"plan", "agents", "retracted", "superseded"}
    assert set(await registry.names(q="small models")) == {"plan", "memorize"}
    assert await registry.names(q='"small models" acting') == ["plan"]
    assert await registry.names(q="planning -agents") == ["plan"]
    assert set(await registry.names(q="retrieval or memorize")) == {"retrieval", "memorize"}
    assert await registry.names(q="telescopes") == []
    assert set(await registry.names(q="planning", capability="Planning", review_state="reviewed by AI")) == {"agents"}
    assert await registry.names(q='NEAR("a" b) AND ) * : "') == []  # nothing a user types is search syntax

    await registry.send("revise_claim", "ada", "retrieval", statement="Telescopes see further with adaptive optics.")
    assert await registry.names(q="telescopes") == ["retrieval"]
    assert await registry.names(q="retrieval") == []
    assert_search_index_matches_the_pages(engine)


async def test_search_ranks_by_relevance_unless_another_sort_is_asked_for(api: Api):
    registry = Registry(api, {"often": random_claim_id(), "once": random_claim_id()}, 0)
    statements = {
        "often": "Planning, and planning again: planning is what helps.",
        "once": "Tool use, retrieval, memory and careful planning help agents in long tasks.",
    }
    for name, statement in statements.items():
        body = {k: v for k, v in draft(registry.ids[name]).items() if k != "claim_id"}
        await registry.send("draft_claim", "ada", name, **{**body, "statement": statement})
    listing = await registry.listing(q="planning")
    assert listing["sort"] == "relevance" and await registry.names(q="planning") == ["often", "once"]
    assert await registry.names(q="planning", sort="id") == sorted(registry.ids, key=registry.ids.get)
    refused = await api.http.get("/claims", params={"sort": "relevance"})
    assert refused.status_code == 400 and refused.json()["error"] == "bad_sort"
    nothing = await api.http.get("/claims", params={"q": " - ! "})
    assert nothing.status_code == 400 and nothing.json()["error"] == "bad_query"


async def page_through(registry: Registry, limit: int, **params) -> list[str]:
    """Every claim id a listing shows, page by page with its cursor."""
    seen, cursor = [], None
    for _ in range(len(registry.ids) + 1):
        body = await registry.listing(limit=limit, **params, **({"cursor": cursor} if cursor else {}))
        assert len(body["items"]) <= limit
        seen += [item["claim_id"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError(f"still paging after {len(seen)} claims: {seen}")


async def test_paging_with_the_cursor_shows_every_claim_once_in_every_sort(api: Api):
    registry = Registry(api, {f"c{n}": random_claim_id() for n in range(13)}, 0)
    for n, name in enumerate(registry.ids):
        body = {k: v for k, v in draft(registry.ids[name]).items() if k != "claim_id"}
        await registry.send("draft_claim", "ada", name, **{**body, "statement": f"Planning helps in case {n}."})
        for source in range(n % 3):  # ties on every count, so the claim id decides within them
            await registry.send("attach_source", "bot", name, source_id=f"s{source}", relation="supports", measured="+1.")
        if n % 4 == 0:
            await registry.send("file_disagreement", "grace", name, disagreement_id="d", argument="Unclear.")
    for params in [*({"sort": sort} for sort in SORTS), {"q": "planning helps"}, {"q": "case", "sort": "evidence"}]:
        whole = [item["claim_id"] for item in (await registry.listing(**params))["items"]]
        assert sorted(whole) == sorted(registry.ids.values()), params
        for limit in (1, 4, 5):
            assert await page_through(registry, limit, **params) == whole, (params, limit)


async def test_a_cursor_of_another_listing_or_a_forged_one_is_a_400(registry: Registry):
    http = registry.api.http
    first = await registry.listing(sort="recent", limit=1)
    cursor = first["next_cursor"]
    assert (await http.get("/claims", params={"sort": "recent", "limit": 1, "cursor": cursor})).status_code == 200
    for params in ({"sort": "evidence"}, {"sort": "recent", "capability": "Planning"}, {"sort": "recent", "include_closed": "true"}):
        response = await http.get("/claims", params={**params, "cursor": cursor})
        assert response.status_code == 400 and response.json()["error"] == "bad_cursor", params
        assert "another sort or other filters" in response.json()["message"]
    fingerprint, _, claim_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    for forged in ("bm90LWEtY2xhaW0", "!!!", _cursor([fingerprint, "a string", claim_id]), _cursor([fingerprint, 5, "x"]), _cursor({})):
        response = await http.get("/claims", params={"sort": "recent", "cursor": forged})
        assert response.status_code == 400 and response.json()["error"] == "bad_cursor", forged


def _cursor(payload) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def plan(engine: Engine, filters: ClaimFilters, sort: str, *, after=None, only_indexes: tuple[str, ...] = ()) -> str:
    """The database's plan for the listing's own statement; on PostgreSQL, with ``only_indexes`` turned off
    (its tables here are tiny, so it would rather scan them: this asks what it does when it may not)."""
    statement = listing_statement(engine.dialect.name, filters, sort=sort, after=after, limit=51)
    sql = str(statement.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            return "\n".join(row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        for setting in only_indexes:
            conn.exec_driver_sql(f"SET {setting} = off")
        return "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + sql))


def test_every_sort_the_api_offers_has_an_order_and_no_order_is_unreachable():
    assert set(get_args(Sort)) == set(SORT_KEYS) | {"relevance"}


def test_search_is_a_lookup_in_the_full_text_index_and_each_sort_walks_its_own_index(engine: Engine):
    search = plan(engine, ClaimFilters(q="planning small"), "relevance", only_indexes=("enable_seqscan",))
    if engine.dialect.name == "sqlite":
        assert "SCAN claim_pages_search VIRTUAL TABLE INDEX" in search, search  # FTS5's MATCH, then claims by key
        assert "SEARCH claim_pages USING INDEX ix_claim_pages_first_seq" in search, search
        assert "SCAN claim_pages" not in search.replace("SCAN claim_pages_search", ""), search
    else:
        assert "Index Scan using ix_claim_pages_statement_search" in search or "Bitmap Index Scan on ix_claim_pages_statement_search" in search, search
        assert "Seq Scan" not in search, search
    for sort, index in (("recent", "ix_claim_pages_recent"), ("contested", "ix_claim_pages_contested"), ("evidence", "ix_claim_pages_evidence")):
        walk = plan(engine, ClaimFilters(), sort, after=(3, "CLM-0001"), only_indexes=("enable_seqscan", "enable_bitmapscan", "enable_sort"))
        assert index in walk and "TEMP B-TREE" not in walk and "Sort" not in walk, (sort, walk)
