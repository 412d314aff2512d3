"""A slug belongs to the claim whose draft is in the log: a reservation without a draft blocks no one for
long, a refused draft frees its slug, and the bucket of owners is rebuilt from the log alone."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from events import Actor
from events.envelope import utc_now
from services.commands import Rejected, parse_command
from services.commands.service import CommandService
from services.commands.slug_rebuild import rebuild_slugs
from services.commands.slugs import RESERVATION_SECONDS, SLUGS, slug_owners
from services.identity.actors import ActorStore
from services.ingest.bulk import BulkIngest
from services.ingest.bulk_lines import read_commands
from services.ingest.page_batches import import_pages
from services.ingest.pages import read_page, sample_pages
from services.log import ClaimLog, PublishError
from services.log.buckets import bucket_keys
from services.log.names import bucket_name, bucket_stream
from tests.conftest import random_claim_id
from tests.integration.audit_log import claimlog
from tests.integration.command_api import ACTORS, draft

BOT = Actor(id="ingest-bot", kind="model", model="pipeline-2")


class RefusingLog(ClaimLog):
    """A log whose server refuses every append (as while a stream's leader is being elected)."""

    async def append(self, claim_id, events, **kwargs):
        raise PublishError(f"no responders: the append to {claim_id} was not stored (503)")


class LostAnswerLog(ClaimLog):
    """A log that stores every append but whose answer is lost on the way back."""

    async def append(self, claim_id, events, **kwargs):
        await super().append(claim_id, events, **kwargs)
        raise PublishError(f"the append to {claim_id} was not acknowledged in time")


def drafting(claim_id: str, slug: str):
    return parse_command({"command": "draft_claim", **draft(claim_id), "slug": slug})


def later() -> object:
    """A clock past every reservation's lapse."""
    return lambda: utc_now() + timedelta(seconds=RESERVATION_SECONDS + 1)


async def bucket_contents(claim_log: ClaimLog) -> dict[str, str | None]:
    owners = slug_owners(claim_log)
    keys = await bucket_keys(claim_log.nc.jetstream(), bucket_name(SLUGS, claim_log.stream), "slug.")
    held = {key.removeprefix("slug."): (await owners.holder(key.removeprefix("slug."))).claim_id for key in keys}
    return {slug: claim for slug, claim in held.items() if claim is not None}


async def test_a_draft_the_log_refuses_after_its_slug_was_taken_leaves_the_slug_free(claim_log: ClaimLog):
    first, second = random_claim_id(), random_claim_id()
    slug = f"refused-{first.lower()}"
    with pytest.raises(PublishError):
        await CommandService(RefusingLog(claim_log.nc, claim_log.spec)).execute(drafting(first, slug), ACTORS["ada"])
    stored = await CommandService(claim_log).execute(drafting(second, slug), ACTORS["grace"])
    assert stored.claim_id == second and (await slug_owners(claim_log).holder(slug)).claim_id == second


async def test_a_draft_stored_whose_answer_was_lost_keeps_its_slug(claim_log: ClaimLog):
    first, second = random_claim_id(), random_claim_id()
    slug = f"lost-{first.lower()}"
    with pytest.raises(PublishError):
        await CommandService(LostAnswerLog(claim_log.nc, claim_log.spec)).execute(drafting(first, slug), ACTORS["ada"])
    with pytest.raises(Rejected) as taken:
        await CommandService(claim_log, slugs=slug_owners(claim_log, clock=later())).execute(drafting(second, slug), ACTORS["grace"])
    assert taken.value.reason == "slug_taken" and first in taken.value.message


async def test_a_reservation_whose_claim_has_no_draft_blocks_no_one_once_it_lapses(claim_log: ClaimLog):
    dead, taker, drafted, late = (random_claim_id() for _ in range(4))
    slug, kept = f"orphan-{dead.lower()}", f"kept-{drafted.lower()}"
    assert await slug_owners(claim_log).take(slug, dead) == (dead, True)  # a process that died before appending
    with pytest.raises(Rejected) as young:
        await CommandService(claim_log).execute(drafting(taker, slug), ACTORS["grace"])
    assert young.value.reason == "slug_taken" and dead in young.value.message
    afterwards = CommandService(claim_log, slugs=slug_owners(claim_log, clock=later()))
    assert (await afterwards.execute(drafting(taker, slug), ACTORS["grace"])).claim_id == taker
    assert (await slug_owners(claim_log).holder(slug)).claim_id == taker
    # A reservation of a claim drafted with another slug lapses too.
    other = f"other-{drafted.lower()}"
    await CommandService(claim_log).execute(drafting(drafted, kept), ACTORS["ada"])
    assert await slug_owners(claim_log).take(other, drafted) == (drafted, True)
    assert (await afterwards.execute(drafting(late, other), ACTORS["grace"])).claim_id == late
    # A reservation whose claim has its draft in the log never lapses.
    with pytest.raises(Rejected) as owned:
        await afterwards.execute(drafting(random_claim_id(), kept), ACTORS["grace"])
    assert owned.value.reason == "slug_taken" and drafted in owned.value.message


@pytest.mark.private_nats
async def test_rebuilding_the_slugs_from_the_log_gives_the_same_bucket(claim_log: ClaimLog, tmp_path: Path):
    service = CommandService(claim_log)
    claims = [random_claim_id() for _ in range(5)]
    for claim in claims:
        await service.execute(drafting(claim, f"rebuilt-{claim.lower()}"), ACTORS["ada"])
    with pytest.raises(Rejected):  # taken: refused, and the bucket keeps the first owner
        await service.execute(drafting(random_claim_id(), f"rebuilt-{claims[0].lower()}"), ACTORS["grace"])
    with pytest.raises(Rejected):  # refused for another reason: its slug is given back
        await service.execute(drafting(claims[1], "given-back"), ACTORS["ada"])
    bulk = [random_claim_id() for _ in range(3)]
    path = tmp_path / "commands.jsonl"
    path.write_text("".join(json.dumps({"command": "draft_claim", **draft(claim)}) + "\n" for claim in [*bulk, claims[2]]))
    lines, _ = read_commands(path, BOT)
    assert len((await BulkIngest(claim_log, BOT).run(lines)).rejected) == 1  # claims[2] is drafted already
    await import_pages(claim_log, [read_page(page) for page in sample_pages()])
    before = await bucket_contents(claim_log)
    assert set(before.values()) == {*claims, *bulk, *(page.stem for page in sample_pages())}

    await claim_log.nc.jetstream().delete_stream(bucket_stream(bucket_name(SLUGS, claim_log.stream)))
    assert await rebuild_slugs(claim_log, slug_owners(claim_log)) == len(before)
    assert await bucket_contents(claim_log) == before


async def test_ingested_pages_record_their_slugs_so_the_api_refuses_a_second_claim_with_one(claim_log: ClaimLog, nats_url: str, tmp_path: Path):
    page = sample_pages()[0]
    slug, owner = page.read_text().split(" ", 1)[0], page.stem
    done = claimlog("ingest", str(page), nats_url=nats_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with pytest.raises(Rejected) as taken:
        await CommandService(claim_log).execute(drafting(random_claim_id(), slug), ACTORS["grace"])
    assert taken.value.reason == "slug_taken" and f"slug {slug!r} belongs to {owner}" in taken.value.message
    # And a page whose slug a claim drafted through the API holds is refused, naming the file and the owner.
    other = tmp_path / "CLM-7777.txt"
    other.write_text(page.read_text().replace(owner, "CLM-7777", 1))
    api_claim = random_claim_id()
    await CommandService(claim_log).execute(drafting(api_claim, "api-first"), ACTORS["ada"])
    other.write_text(other.read_text().replace(slug, "api-first", 1))
    refused = claimlog("ingest", str(other), nats_url=nats_url, cwd=tmp_path)
    assert refused.returncode == 1 and f"slug 'api-first' belongs to {api_claim}" in refused.stderr, refused.stderr
    assert not await claim_log.read_claim("CLM-7777")


async def test_ingested_json_lines_record_their_slugs_so_the_api_refuses_a_second_claim_with_one(claim_log: ClaimLog, nats_url: str, tmp_path: Path):
    token = (await (await ActorStore.open(claim_log.nc, create=True)).issue(BOT))[0]
    first, second, api_claim = random_claim_id(), random_claim_id(), random_claim_id()
    await CommandService(claim_log).execute(drafting(api_claim, f"api-{api_claim.lower()}"), ACTORS["ada"])
    lines = [{"command": "draft_claim", **draft(first), "slug": f"bulk-{first.lower()}"},
             {"command": "draft_claim", **draft(second), "slug": f"api-{api_claim.lower()}"}]
    path = tmp_path / "commands.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = claimlog("ingest", str(path), nats_url=nats_url, cwd=tmp_path, token=token)
    assert done.returncode == 1 and "1 accepted" in done.stderr, done.stderr
    assert f"line 2 slug_taken: slug 'api-{api_claim.lower()}' belongs to {api_claim}" in done.stderr
    with pytest.raises(Rejected) as taken:
        await CommandService(claim_log).execute(drafting(random_claim_id(), f"bulk-{first.lower()}"), ACTORS["grace"])
    assert taken.value.reason == "slug_taken" and first in taken.value.message


async def test_a_forged_draft_owns_no_slug_in_a_rebuild_nor_keeps_one_taken(claim_log: ClaimLog):
    # With signatures required, an unsigned draft published past the API (a holder of a NATS credential) is
    # refused by the gate: the slugs rebuilt from the log (a restore) are not its, and its claim's reservation
    # is not kept for it.
    from services.identity.keys import KeyRing
    from tests.builders import drafted
    from tests.builders.raw import publish_raw

    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    delegate, _ = await ring.add(Actor(id="claimlog-api", kind="service"), delegate=True)
    await ring.require(await claim_log.head())
    forged, honest = random_claim_id(), random_claim_id()
    await publish_raw(claim_log, forged, drafted(forged, slug="wanted-slug"))  # unsigned: refused by every reader
    await publish_raw(claim_log, honest, drafted(honest, slug="wanted-slug"), signer=delegate)
    slugs = slug_owners(claim_log)
    await rebuild_slugs(claim_log, slugs)
    assert (await slugs.holder("wanted-slug")).claim_id == honest
    assert not await slugs.drafted_with(forged, "wanted-slug")
    assert await slugs.drafted_with(honest, "wanted-slug")


async def test_a_second_draft_of_a_claim_owns_no_slug_in_a_rebuild(claim_log: ClaimLog):
    # A claim is drafted once (events/rules.py): a second draft, signed by a producer's own key and published
    # past the API, is refused by every reader's gate, so the slugs rebuilt from the log are not its.
    from services.identity.keys import KeyRing
    from tests.builders import drafted
    from tests.builders.raw import publish_raw

    ring = await KeyRing.open(claim_log.nc, stream=claim_log.stream)
    producer, _ = await ring.add(BOT)
    await ring.require(await claim_log.head())
    claim, later = random_claim_id(), random_claim_id()
    await publish_raw(claim_log, claim, drafted(claim, actor=BOT, slug="first-slug"), signer=producer)
    await publish_raw(claim_log, claim, drafted(claim, actor=BOT, slug="second-slug"), signer=producer)
    await publish_raw(claim_log, later, drafted(later, actor=BOT, slug="second-slug"), signer=producer)
    slugs = slug_owners(claim_log)
    await rebuild_slugs(claim_log, slugs)
    assert (await slugs.holder("first-slug")).claim_id == claim
    assert (await slugs.holder("second-slug")).claim_id == later
