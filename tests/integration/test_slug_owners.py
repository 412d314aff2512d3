"""A slug belongs to the claim whose draft is in the log: a reservation without a draft blocks no one for
long, a refused draft frees its slug, and the bucket of owners is rebuilt from the log alone."""

from __future__ import annotations

from datetime import timedelta

import pytest

from events.envelope import utc_now
from services.commands import Rejected, parse_command
from services.commands.service import CommandService
from services.commands.shared_state import bucket_name
from services.commands.slug_rebuild import rebuild_slugs
from services.commands.slugs import RESERVATION_SECONDS, SLUGS, slug_owners
from services.log import ClaimLog, PublishError
from services.log.buckets import bucket_keys, bucket_stream
from tests.conftest import random_claim_id
from tests.integration.command_api import ACTORS, draft


class RefusingLog(ClaimLog):
    """A log whose server refuses every append (as while a stream's leader is being elected)."""

    async def append(self, claim_id, events, **kwargs):
        raise PublishError(f"no responders: the append to {claim_id} was not stored (503)")


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
    # A reservation whose claim has its draft in the log never lapses.
    await CommandService(claim_log).execute(drafting(drafted, kept), ACTORS["ada"])
    with pytest.raises(Rejected) as owned:
        await afterwards.execute(drafting(late, kept), ACTORS["grace"])
    assert owned.value.reason == "slug_taken" and drafted in owned.value.message


@pytest.mark.private_nats
async def test_rebuilding_the_slugs_from_the_log_gives_the_same_bucket(claim_log: ClaimLog):
    service = CommandService(claim_log)
    claims = [random_claim_id() for _ in range(5)]
    for claim in claims:
        await service.execute(drafting(claim, f"rebuilt-{claim.lower()}"), ACTORS["ada"])
    with pytest.raises(Rejected):  # taken: refused, and the bucket keeps the first owner
        await service.execute(drafting(random_claim_id(), f"rebuilt-{claims[0].lower()}"), ACTORS["grace"])
    with pytest.raises(Rejected):  # refused for another reason: its slug is given back
        await service.execute(drafting(claims[1], "given-back"), ACTORS["ada"])
    before = await bucket_contents(claim_log)
    assert before == {f"rebuilt-{claim.lower()}": claim for claim in claims}

    await claim_log.nc.jetstream().delete_stream(bucket_stream(bucket_name(SLUGS, claim_log.stream)))
    assert await rebuild_slugs(claim_log, slug_owners(claim_log)) == len(claims)
    assert await bucket_contents(claim_log) == before
