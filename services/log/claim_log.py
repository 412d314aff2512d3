"""``ClaimLog``: the log as the rest of claimlog sees it, one connection and one stream."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime

from nats.aio.client import Client
from nats.js.errors import NotFoundError

from events import Event
from services.log.consumer import DurableConsumer, PartitionConsumers
from services.log.pipeline import Pipeline
from services.log.reader import ClaimHead, ClaimReader, StoredEvent, claim_head, stream_head
from services.log.signing import Signer
from services.log.stream import StreamSpec, ensure_stream
from services.log.writer import Appended, append


class ClaimLog:
    """Appends and reads on one stream through one NATS connection; appends signed by ``signer`` when given."""

    def __init__(self, nc: Client, spec: StreamSpec, *, signer: Signer | None = None) -> None:
        self.nc = nc
        self.signer = signer
        self.spec = spec
        self.stream = spec.name
        self.layout = spec.layout
        self._reader = ClaimReader(nc, spec.name, layout=spec.layout)

    async def ensure(self, *, create: bool = True) -> None:
        """Create the stream (unless told not to: a missing one is then an error), or refuse one that
        lets events be deleted or purged."""
        await ensure_stream(self.nc, self.spec, create=create)

    async def append(
        self, claim_id: str, events: Sequence[Event], *, expected_seq: int, prev_hash: str | None
    ) -> Appended:
        """Append events to one claim atomically if its last event is still at ``expected_seq``."""
        return await append(
            self.nc, self.stream, claim_id, events, expected_seq=expected_seq, prev_hash=prev_hash, layout=self.layout,
            signer=self.signer,
        )

    async def read_claim(
        self, claim_id: str, *, after_seq: int = 0, up_to_seq: int | None = None
    ) -> list[StoredEvent]:
        """The claim's events in log order, optionally a window of them."""
        return await self._reader.read(claim_id, after_seq=after_seq, up_to_seq=up_to_seq)

    async def claims_with_events(self, claim_ids: list[str]) -> set[str]:
        """Which of the claims have any event (many asked at once)."""
        return await self._reader.claims_with_events(claim_ids)

    async def read_log(self, *, after_seq: int, limit: int) -> list[StoredEvent]:
        """Up to ``limit`` events of the whole log after ``after_seq``, in log order."""
        return await self._reader.read_log(after_seq=after_seq, limit=limit)

    async def claim_head(self, claim_id: str) -> ClaimHead:
        """The claim's last sequence and hash."""
        return await claim_head(self.nc, self.stream, claim_id, layout=self.layout)

    async def head(self) -> int:
        """The last sequence in the whole log."""
        return await stream_head(self.nc, self.stream)

    def consumer(self, name: str, *, max_batch: int, partitions: Sequence[int] | None = None) -> DurableConsumer | PartitionConsumers:
        """A durable consumer of every event, or of some partitions' (the server filters), for a projector:
        one consumer of the whole log for all of them, one per partition for some (``PartitionConsumers``)."""
        if partitions is not None and len(set(partitions)) > 1 and not self.covers(partitions):
            return PartitionConsumers(self.nc, self.stream, name, max_batch=max_batch, layout=self.layout, partitions=partitions)
        whole = partitions is None or self.covers(partitions)
        return DurableConsumer(self.nc, self.stream, name, max_batch=max_batch, layout=self.layout, partitions=None if whole else partitions)

    def covers(self, partitions: Sequence[int]) -> bool:
        """Whether ``partitions`` are every partition of the log."""
        return set(partitions) >= set(range(max(self.layout.partitions, 1)))

    async def first_in_partition(self, partition: int, after_seq: int, *, timeout: float | None = None) -> tuple[int, datetime | None] | None:
        """The sequence and stored time of the first event of ``partition`` after ``after_seq`` (None: none yet).

        Asked of the stream's leader (not a direct get, which any copy may answer from behind): a copy
        that has not yet stored an event would make the partition look past it."""
        subject = self.layout.partition_filter(partition)
        try:
            found = await asyncio.wait_for(self.nc.jetstream().get_msg(self.stream, seq=after_seq + 1, subject=subject, next=True), timeout)
        except NotFoundError:
            return None
        return found.seq, found.time

    async def forget_consumer(self, name: str) -> None:
        """Delete a consumer made for one job (a replay); a missing one is fine."""
        with contextlib.suppress(NotFoundError):
            await self.nc.jetstream().delete_consumer(self.stream, name)

    def pipeline(self, *, window: int = 512) -> Pipeline:
        """Many appends in flight at once (use as ``async with``)."""
        return Pipeline(self.nc, self.stream, window=window, layout=self.layout, signer=self.signer)
