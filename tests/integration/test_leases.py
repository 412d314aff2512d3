"""Partition leases in a real NATS key-value bucket, and rendezvous hashing with bounded shares over the live workers."""

from __future__ import annotations

import asyncio
from collections import Counter

from services.log.names import leases_bucket
from services.log.servers import connect
from services.projector.leases import BUCKET, Leases, assignment, wanted

TTL = 1.0


def test_each_partition_has_one_owner_shares_are_even_and_a_joining_worker_moves_mostly_what_it_takes():
    before = assignment(["a", "b"], 64)
    after = assignment(["b", "c", "a"], 64)
    assert set(before) == set(after) == set(range(64))
    assert sorted(Counter(after.values()).values()) == [21, 21, 22]
    moved = {k for k in range(64) if before[k] != after[k]}
    assert {k for k in range(64) if after[k] == "c"} <= moved
    assert len(moved - {k for k in range(64) if after[k] == "c"}) <= 2  # a few move between the others to even the shares
    assert wanted("c", ["a", "b"], 64) == {k for k, w in after.items() if w == "c"}
    for workers in range(1, 8):  # 16 partitions: no worker holds more than one partition over another
        names = [f"w{i}" for i in range(workers)]
        shares = [len(wanted(name, names, 16)) for name in names]
        assert sum(shares) == 16 and max(shares) - min(shares) <= 1, shares


async def test_a_lease_is_held_by_one_worker_renewed_at_a_higher_epoch_and_lapses_when_not_renewed(nats_url: str):
    nc = await connect(nats_url)
    try:
        first = await Leases.open(nc.jetstream(), "first", ttl=TTL)
        second = await Leases.open(nc.jetstream(), "second", ttl=TTL)
        lease = await first.take(3)
        assert lease is not None and await second.take(3) is None
        renewed = await first.renew(lease)
        assert renewed is not None and renewed.epoch > lease.epoch
        assert await first.renew(lease) is None  # an old revision renews nothing
        assert await second.holders(4) == {3: ("first", renewed.epoch)}
        await asyncio.sleep(TTL * 1.5)  # the lease lapsing is what is tested: time must pass
        taken = await second.take(3)
        assert taken is not None and taken.epoch > renewed.epoch
        assert await first.renew(renewed) is None  # paused past its lease: the partition is another's
    finally:
        await nc.close()


async def test_a_lease_given_back_is_taken_at_once_and_workers_are_live_while_they_announce(nats_url: str):
    nc = await connect(nats_url)
    try:
        first = await Leases.open(nc.jetstream(), "first", ttl=TTL)
        second = await Leases.open(nc.jetstream(), "second", ttl=TTL)
        await first.announce()
        await second.announce()
        assert await first.workers() == ["first", "second"]
        lease = await first.take(0)
        await first.give_back([lease])
        await first.leave()
        assert await second.take(0) is not None
        assert await second.workers() == ["second"]
        await asyncio.sleep(TTL * 1.5)  # an announcement lapsing is what is tested: time must pass
        assert await second.workers() == []
    finally:
        await nc.close()


async def test_workers_of_registries_sharing_a_server_keep_their_leases_apart(nats_url: str):
    assert leases_bucket() == BUCKET and leases_bucket("OTHER") != BUCKET
    nc = await connect(nats_url)
    try:
        ours = await Leases.open(nc.jetstream(), "ours", ttl=TTL)
        theirs = await Leases.open(nc.jetstream(), "theirs", ttl=TTL, bucket=leases_bucket("OTHER"))
        await ours.announce()
        await theirs.announce()
        assert await ours.take(0) is not None and await theirs.take(0) is not None
        assert await ours.workers() == ["ours"] and await theirs.workers() == ["theirs"]
    finally:
        await nc.close()
