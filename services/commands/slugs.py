"""A slug belongs to the claim whose draft is in the log; the bucket says which claim is taking it.

The log is the only source of truth: a slug names the claim drafted first with it. Every path that
drafts (the command API, a bulk JSON Lines ingest, a registry page ingest) records the slug's claim
in a key-value bucket (``services/log/shared_state.py``) before the draft is appended, so that
of two drafts racing for one slug, in any processes, one gets it and the other is refused (409
``slug_taken``). A record is only a reservation until its draft lands:

- a draft refused after reserving gives its slug back; after an append that failed, or a run that
  ends with drafts that did not land, the slug is given back once the log says the draft is not there;
- a reservation whose claim has no draft with the slug in the log blocks no one once it is
  ``RESERVATION_SECONDS`` old (by the server's time of the record): the next taker finds no such draft
  in the log and takes the slug over by compare-and-set on the record's revision. Younger ones block,
  since their draft may still be on its way (an append in flight, a bulk batch waiting for its turn).

So the bucket can always be rebuilt from the log alone (``services/commands/slug_rebuild.py``), and
a restore does so rather than restoring a copy. The read side holds the same rule for events no
writer checked (a direct producer's): a slug names the claim with the smallest first sequence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import nats.errors
from nats.js.errors import APIError, KeyWrongLastSequenceError, NotFoundError

from events.envelope import utc_now
from services.admission import Admitted, gate_for
from services.commands.decide import Kind, Rejected
from services.log import ClaimLog, LogError
from services.log.batches import MAX_BATCH_EVENTS
from services.log.names import SLUGS, bucket_stream, key_subject
from services.log.shared_state import LazyBucket

RESERVATION_SECONDS = 60.0  # longer than any append (or bulk batch) may take to land after its slug was taken
TAKE_TRIES = 5
WRONG_LAST_SEQUENCE = 10071
ACK_TIMEOUT = 10.0
DELETED = frozenset({"DEL", "PURGE"})


@dataclass(frozen=True)
class Holder:
    """A slug's record: the claim it names (None: free), its revision (0: never written), when the server stored it."""

    claim_id: str | None
    revision: int = 0
    at: datetime | None = None


class SlugOwners:
    """Which claim each slug belongs to, or is being taken by."""

    def __init__(self, bucket: LazyBucket, log: ClaimLog, *, clock: Callable[[], datetime] = utc_now) -> None:
        self._bucket, self._log, self._clock = bucket, log, clock
        self._atomic: bool | None = None

    async def take(self, slug: str, claim_id: str) -> tuple[str, bool]:
        """The slug's owner after trying to take it for ``claim_id``, and whether this call took it."""
        for _ in range(TAKE_TRIES):
            held = await self.holder(slug)
            if held.claim_id == claim_id:
                return claim_id, False
            if held.claim_id is not None and not await self._lapsed(slug, held):
                return held.claim_id, False
            if await self._write(slug, claim_id, held.revision):
                return claim_id, True
        raise Rejected(Kind.CONFLICT, "write_conflict", f"slug {slug!r} kept changing hands during {TAKE_TRIES} attempts; retry")

    async def take_many(self, wanted: dict[str, str]) -> tuple[dict[str, str], set[str]]:
        """Each slug's owner after trying to take it for its claim in ``wanted``, and the slugs this call took.

        Slugs free in the bucket are taken a thousand at a time in one atomic batch (one synced
        acknowledgement); a batch refused because one of its slugs is held goes slug by slug."""
        owners: dict[str, str] = {}
        taken: set[str] = set()
        items = list(wanted.items())
        for start in range(0, len(items), MAX_BATCH_EVENTS):
            chunk = items[start : start + MAX_BATCH_EVENTS]
            if await self._creates_all(chunk):
                owners.update(chunk)
                taken.update(slug for slug, _ in chunk)
                continue
            for (slug, _), (owner, took) in zip(chunk, await asyncio.gather(*(self.take(s, c) for s, c in chunk)), strict=True):
                owners[slug] = owner
                if took:
                    taken.add(slug)
        return owners, taken

    async def give_back(self, slug: str, claim_id: str) -> None:
        """Free a slug this claim took for a draft that was then refused (only while it is still its own)."""
        held = await self.holder(slug)
        if held.claim_id == claim_id:
            kv = await self._bucket()
            with contextlib.suppress(KeyWrongLastSequenceError):  # taken again meanwhile: not ours to free
                await kv.delete(_key(slug), last=held.revision)

    async def give_back_unless_drafted(self, slug: str, claim_id: str) -> None:
        """Free a slug this claim took unless the log holds its draft with it (an append whose answer was
        lost may have landed). When the log cannot say, the reservation stays and lapses if no draft comes."""
        with contextlib.suppress(LogError, TimeoutError, nats.errors.Error):
            if not await self.drafted_with(claim_id, slug):
                await self.give_back(slug, claim_id)

    async def give_back_many(self, slugs: dict[str, str]) -> None:
        """Free the slugs these claims took for drafts the log does not hold."""
        await asyncio.gather(*(self.give_back_unless_drafted(slug, claim_id) for slug, claim_id in slugs.items()))

    async def drafted_with(self, claim_id: str, slug: str) -> bool:
        """Whether the log holds the claim's draft, and with this slug (a draft is a claim's first event)."""
        stored = await self._log.read_claim(claim_id)
        if not stored:
            return False
        verdict = (await gate_for(self._log, [stored[0].signature])).stored(stored[0])  # a forged draft holds nothing
        return isinstance(verdict, Admitted) and verdict.event.type == "ClaimDrafted" and verdict.event.slug == slug

    async def record(self, owners: dict[str, str]) -> None:
        """Write each slug's owner as it is, whatever the bucket held (a rebuild from the log)."""
        kv = await self._bucket()
        items = list(owners.items())
        for start in range(0, len(items), MAX_BATCH_EVENTS):
            chunk = items[start : start + MAX_BATCH_EVENTS]
            if not await self._batch(chunk, expect_free=False):
                await asyncio.gather(*(kv.put(_key(slug), claim_id.encode()) for slug, claim_id in chunk))

    async def holder(self, slug: str) -> Holder:
        """The slug's record as the bucket holds it."""
        await self._bucket()
        try:
            msg = await self._log.nc.jetstream().get_msg(bucket_stream(self._bucket.name), subject=self._subject(slug), direct=True)
        except NotFoundError:
            return Holder(None)
        if msg.headers and msg.headers.get("KV-Operation") in DELETED:
            return Holder(None, msg.seq, msg.time)
        return Holder((msg.data or b"").decode(), msg.seq, msg.time)

    async def _lapsed(self, slug: str, held: Holder) -> bool:
        """Whether a reservation blocks no one any more: old enough, and the log holds no draft of its claim with the slug."""
        if held.at is None or (self._clock() - held.at).total_seconds() < RESERVATION_SECONDS:
            return False
        return not await self.drafted_with(held.claim_id, slug)

    async def _write(self, slug: str, claim_id: str, revision: int) -> bool:
        """Record ``claim_id`` as the slug's owner if the record is still at ``revision`` (compare-and-set)."""
        await self._bucket()
        headers = {"Nats-Expected-Last-Subject-Sequence": str(revision)}
        try:
            await self._log.nc.jetstream().publish(self._subject(slug), claim_id.encode(), headers=headers)
        except APIError as error:
            if error.err_code == WRONG_LAST_SEQUENCE:
                return False
            raise
        return True

    async def _creates_all(self, chunk: list[tuple[str, str]]) -> bool:
        return await self._batch(chunk, expect_free=True)

    async def _batch(self, chunk: list[tuple[str, str]], *, expect_free: bool) -> bool:
        """Write the chunk in one atomic batch; False when the bucket takes no batches or refused this one."""
        if not await self._takes_batches():
            return False
        nc, batch_id, last = self._log.nc, uuid.uuid4().hex, len(chunk)
        for number, (slug, claim_id) in enumerate(chunk, start=1):
            headers = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(number)}
            if expect_free:
                headers["Nats-Expected-Last-Subject-Sequence"] = "0"
            if number < last:
                await nc.publish(self._subject(slug), claim_id.encode(), headers=headers)
                continue
            headers["Nats-Batch-Commit"] = "1"
            reply = await nc.request(self._subject(slug), claim_id.encode(), headers=headers, timeout=ACK_TIMEOUT)
            with contextlib.suppress(ValueError):
                return "error" not in json.loads(reply.data or b"{}")  # refused: nothing of it was stored
            return False
        return True

    async def _takes_batches(self) -> bool:
        if self._atomic is None:
            await self._bucket()
            info = await self._log.nc.jetstream().stream_info(bucket_stream(self._bucket.name))
            self._atomic = bool(getattr(info.config, "allow_atomic", False))
        return self._atomic

    def _subject(self, slug: str) -> str:
        return key_subject(self._bucket.name, _key(slug))


def slug_owners(log: ClaimLog, *, clock: Callable[[], datetime] = utc_now) -> SlugOwners:
    """The slugs' owners of the registry ``log`` belongs to, in the bucket beside it."""
    return SlugOwners(LazyBucket(log.nc, SLUGS, stream=log.stream, replicas=log.spec.replicas), log, clock=clock)


def _key(slug: str) -> str:
    return f"slug.{slug}"  # a slug is [a-z0-9-]: safe in a key as it is


__all__ = ["RESERVATION_SECONDS", "SLUGS", "Holder", "SlugOwners", "slug_owners"]
