"""Who folds which partition: leases in a NATS key-value bucket, and rendezvous hashing over live workers.

A lease is the key ``partition.<k>`` holding the owner's name. It is taken with ``create`` (only when
no live lease exists) and renewed with ``update(..., last=revision)``, a compare-and-set on the
revision: a worker that lost its lease cannot renew it. The revision a worker holds is its epoch, which
the writer puts into the partition's checkpoint (``services/projector/writer.py``), so a worker paused
past its lease is refused at its next commit. Every entry of the bucket lives ``ttl`` seconds unless
written again: a killed worker's leases lapse within that time, a stopping worker deletes its own at once.

Workers announce themselves under ``worker.<name>``; each wants the partitions that rendezvous hashing
gives it among the live workers, so a joining worker takes its share and the others let go of it.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.errors import (
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue

from services.log.buckets import bucket_keys, open_named
from services.log.lease_bucket import bucket_ttl, ensure_bucket
from services.log.names import LEASES, bucket_stream, key_subject

BUCKET = LEASES  # the default registry's; another stream's registry has its own (``leases_bucket``)


def weight(worker: str, partition: int) -> int:
    """The rendezvous weight of ``worker`` for ``partition``: the same in every process."""
    return int.from_bytes(hashlib.blake2b(f"{worker}/{partition}".encode(), digest_size=8).digest(), "big")


@functools.lru_cache(maxsize=64)
def _assign(live: tuple[str, ...], partitions: int) -> dict[int, str]:
    share, extra = divmod(partitions, len(live))  # every worker holds `share`; `extra` of them one more
    pairs = sorted(((weight(w, k), w, k) for w in live for k in range(partitions)), reverse=True)
    owners: dict[int, str] = {}
    counts = dict.fromkeys(live, 0)
    for _, worker, k in pairs:
        if k in owners:
            continue
        if counts[worker] == share and extra > 0:
            extra -= 1
        elif counts[worker] >= share:
            continue
        owners[k] = worker
        counts[worker] += 1
    return owners


def assignment(workers: Iterable[str], partitions: int) -> dict[int, str]:
    """Each partition's owner among the live ``workers``: rendezvous hashing with bounded shares.

    The (worker, partition) pairs are taken in order of their rendezvous weight, highest first, and a
    partition goes to the first pair whose worker holds fewer than the even share (``partitions //
    workers``, or one more while the remainder lasts). Every process computes the same answer from the same live
    workers. Plain rendezvous (each partition to its highest weight) moves only a joining worker's
    share, but leaves shares uneven (16 partitions among 4 workers: 6, 5, 4, 1 seen), and a worker
    with 6 receives 37% of the log; the bound keeps every share within one partition of the others,
    at the cost of moving a few partitions between the other workers when one joins or leaves.
    """
    live = tuple(sorted(set(workers)))
    return dict(_assign(live, partitions)) if live else {}


def wanted(worker: str, workers: Iterable[str], partitions: int) -> set[int]:
    """The partitions ``worker`` should fold among ``workers`` (it counts itself live)."""
    owners = assignment(set(workers) | {worker}, partitions)
    return {k for k, owner in owners.items() if owner == worker}


class LeaseConfigError(RuntimeError):
    """The leases bucket does not hold leases of the configured time."""


@dataclass(frozen=True)
class Lease:
    """A partition held by this worker; ``epoch`` is the lease's revision in the bucket."""

    partition: int
    epoch: int


class Leases:
    """One worker's view of the bucket: announce itself, take, renew and give back partitions."""

    def __init__(self, kv: KeyValue, worker: str, *, js: JetStreamContext, bucket: str = BUCKET) -> None:
        self._kv, self.worker = kv, worker
        self._js, self._bucket = js, bucket

    @classmethod
    async def open(cls, js: JetStreamContext, worker: str, *, ttl: float, replicas: int = 1, bucket: str = BUCKET) -> Leases:
        """The bucket (made when missing, with entries living ``ttl`` seconds) as seen by ``worker``;
        a bucket made with another lease time is refused (a worker would renew too late or too often)."""
        kept = await bucket_ttl(js, bucket)
        if kept is None:
            return cls(await ensure_bucket(js, ttl=ttl, replicas=replicas, bucket=bucket), worker, js=js, bucket=bucket)
        if kept != ttl:
            raise LeaseConfigError(
                f"the leases bucket {bucket} keeps a lease {kept:g}s, but CLAIMLOG_LEASE_SECONDS is {ttl:g}: give every "
                f"worker the same setting, and let `claimlog up` or the deploy's stream service (as admin, with the new "
                "setting) change the bucket"
            )
        return cls(await open_named(js, LEASES, bucket), worker, js=js, bucket=bucket)

    async def announce(self) -> None:
        """Say this worker is alive (again within the bucket's ttl, or it counts as gone)."""
        await self._kv.put(f"worker.{self.worker}", b"")

    async def workers(self) -> list[str]:
        """The live workers, this one included once it has announced itself: the worker keys the
        bucket's stream holds, in one request (an entry not written again within the ttl is gone from
        it, and one that left is purged). Listing the keys through a consumer, made and removed at
        every look, cost the worker's event loop enough to show in publish -> visible latency."""
        return [key.removeprefix("worker.") for key in await bucket_keys(self._js, self._bucket, "worker.")]

    async def take(self, partition: int) -> Lease | None:
        """The lease of ``partition``, if no other worker holds a live one. A lease held under this
        worker's own name (left by its previous process, restarted under the same name) is taken over
        at a new revision, which fences off anything that process might still commit."""
        try:
            return Lease(partition, await self._kv.create(_key(partition), self.worker.encode()))
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await self._kv.get(_key(partition))
        except KeyNotFoundError:
            return None
        if entry.value != self.worker.encode() or entry.revision is None:
            return None
        return await self.renew(Lease(partition, entry.revision))

    async def renew(self, lease: Lease) -> Lease | None:
        """The lease again at a new epoch, or ``None`` when it lapsed or another worker took it."""
        try:
            return Lease(lease.partition, await self._kv.update(_key(lease.partition), self.worker.encode(), last=lease.epoch))
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            return None

    async def give_back(self, leases: Sequence[Lease]) -> None:
        """Delete these leases (only where still this worker's) so others take them at once."""
        for lease in leases:
            try:
                await self._kv.delete(_key(lease.partition), last=lease.epoch)
            except (KeyWrongLastSequenceError, KeyNotFoundError):
                continue

    async def leave(self) -> None:
        """Stop counting as a live worker: the key is purged from the stream (a delete would leave a
        marker under its subject, which ``workers`` would count until it expired)."""
        await self._js.purge_stream(bucket_stream(self._bucket), subject=key_subject(self._bucket, f"worker.{self.worker}"))

    async def holders(self, partitions: int) -> dict[int, tuple[str, int]]:
        """Who holds each partition's live lease, and at which epoch."""
        held = {}
        for k in range(partitions):
            try:
                entry = await self._kv.get(_key(k))
            except KeyNotFoundError:
                continue
            if entry.value:
                held[k] = (entry.value.decode(), entry.revision)
        return held


def _key(partition: int) -> str:
    return f"partition.{partition}"
