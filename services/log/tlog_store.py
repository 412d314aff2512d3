"""The transparency log's storage on the log's own engine: a key-value bucket and an object store.

- ``claimlog_tlog`` (key-value, history 1): ``tree`` (the tree's identity: its origin, the log's
  verifier key, the stream it is built over and when that stream was made; written once, with create),
  ``checkpoint`` (the last signed checkpoint, replaced only by compare-and-set at its revision, so two
  integrators can never both extend the tree), ``cosigned`` (a checkpoint with its witnesses' cosignatures), ``lease`` (which integrator holds the tree, until when)
  and ``status`` (why the integrator stopped, when it refuses).
- ``claimlog_tiles`` (object store): every hash tile and entry bundle, named by its C2SP path
  (``tile/0/x001/234``, ``tile/entries/005.p/17``). Full tiles are written once; each partial width a
  checkpoint needs is its own object, kept (C2SP tlog-tiles: every partial tile of a published
  checkpoint stays servable until its full tile exists, and keeping them costs little).

Both are made by whoever may (``create``), with the log's number of copies, and backed up with it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from dataclasses import asdict, dataclass

from nats.aio.client import Client
from nats.js.api import ObjectStoreConfig, StorageType
from nats.js.client import JetStreamContext
from nats.js.errors import (
    BucketNotFoundError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
    ObjectDeletedError,
    ObjectNotFoundError,
)
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore

from events.log_entry import Predecessor
from services.log.buckets import find_named, open_named
from services.log.errors import LogError
from services.log.names import TLOG, object_stream, tiles_bucket, tlog_bucket
from services.log.replication import placed

TREE, CHECKPOINT, COSIGNED, LEASE, STATUS = "tree", "checkpoint", "cosigned", "lease", "status"


class LostRace(LogError):
    """Another integrator changed the checkpoint or the lease first: this one must stop and read again."""


class TileMissing(LogError):
    """A tile or bundle the stored tree needs is not in the object store."""


@dataclass(frozen=True)
class TreeRecord:
    """A tree's identity, fixed when it is made: never re-read from settings or the environment."""

    origin: str
    vkey: str
    stream: str
    stream_created: str  # the stream's creation time when the tree last matched it (RFC 3339)
    created_at: float
    # A log that succeeds another (a new log identity): its entry 0 names the previous log's key and last
    # checkpoint, so stream sequence s is entry s, not s - 1; its tiles are stored under their own prefix,
    # beside the previous log's, which stay as they were.
    predecessor: Predecessor | None = None
    tiles_prefix: str = ""

    @property
    def offset(self) -> int:
        """What entry indexes run ahead of stream sequences minus one: 1 after a predecessor entry, else 0."""
        return 0 if self.predecessor is None else 1

    def entry_index(self, seq: int) -> int:
        """The entry index of the message at stream sequence ``seq``."""
        return seq - 1 + self.offset

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> TreeRecord:
        fields = json.loads(data)
        if fields.get("predecessor") is not None:
            fields["predecessor"] = Predecessor(**fields["predecessor"])
        return cls(**fields)


@dataclass(frozen=True)
class Lease:
    holder: str
    until: float


class TlogStore:
    """The tree record, checkpoint, lease and status (key-value) and the tiles (object store) of one log."""

    def __init__(self, js: JetStreamContext, kv: KeyValue, objects: ObjectStore, stream: str) -> None:
        self.js, self.kv, self.objects, self.stream = js, kv, objects, stream
        self.prefix = ""  # the tiles of the tree in use (a successor's are under their own prefix): ``use``

    def use(self, record: TreeRecord) -> TreeRecord:
        """Read and write the tiles of the tree ``record`` from now on."""
        self.prefix = record.tiles_prefix
        return record

    @classmethod
    async def open(cls, nc: Client, stream: str, *, replicas: int = 1, create: bool = True) -> TlogStore:
        """The stores of the log over ``stream``, made (when ``create``) with ``replicas`` copies when missing."""
        js = nc.jetstream()
        kv_name, obj_name = tlog_bucket(stream), tiles_bucket(stream)
        kv = await find_named(js, kv_name)
        if kv is None:
            if not create:
                raise LogError(f"the transparency log of {stream} has no bucket {kv_name} yet: its integrator makes it")
            kv = await open_named(js, TLOG, kv_name, replicas=replicas)
        try:
            objects = await js.object_store(obj_name)
        except (BucketNotFoundError, NotFoundError):
            if not create:
                raise LogError(f"the transparency log of {stream} has no object store {obj_name} yet") from None
            config = ObjectStoreConfig(bucket=obj_name, storage=StorageType.FILE, replicas=replicas,
                                       description=f"claimlog: the tiles of the transparency log of {stream}")
            objects = await placed(lambda: js.create_object_store(obj_name, config), what=f"object store {obj_name}", wanted=replicas)
        return cls(js, kv, objects, stream)

    async def _get(self, key: str) -> tuple[bytes | None, int]:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None, 0
        return entry.value, entry.revision or 0

    async def tree(self) -> TreeRecord | None:
        """The tree's identity, or None before the tree is made."""
        data, _ = await self._get(TREE)
        return None if data is None else TreeRecord.decode(data)

    async def create_tree(self, record: TreeRecord) -> None:
        """Record a new tree; ``LostRace`` when one exists (a tree is never made twice)."""
        try:
            await self.kv.create(TREE, record.encode())
        except KeyWrongLastSequenceError:
            raise LostRace(f"the transparency log of {self.stream} already has a tree") from None

    async def update_tree(self, record: TreeRecord) -> None:
        """Record that the tree matches a re-created stream (its identity, origin and key, are unchanged)."""
        _, revision = await self._get(TREE)
        try:
            await self.kv.update(TREE, record.encode(), last=revision)
        except KeyWrongLastSequenceError:
            raise LostRace("the tree record changed while it was updated") from None

    async def succeed(self, record: TreeRecord, previous: TreeRecord) -> None:
        """Make ``record`` (a new log identity, succeeding ``previous``) the tree: its checkpoint, cosignatures
        and status start empty, the previous tree's tiles stay where they are; ``LostRace`` when the tree
        record is no longer ``previous``."""
        data, revision = await self._get(TREE)
        if data is None or TreeRecord.decode(data) != previous:
            raise LostRace(f"the tree record of {self.stream} changed while a new log identity was made")
        try:
            await self.kv.update(TREE, record.encode(), last=revision)
        except KeyWrongLastSequenceError:
            raise LostRace("the tree record changed while a new log identity was made") from None
        for key in (CHECKPOINT, COSIGNED, STATUS):
            data, _ = await self._get(key)
            if data is not None:
                await self.kv.delete(key)

    async def checkpoint(self) -> tuple[str | None, int]:
        """The last signed checkpoint (a note) and its revision (0: none yet)."""
        data, revision = await self._get(CHECKPOINT)
        return (None if data is None else data.decode()), revision

    async def swap_checkpoint(self, note: str, revision: int) -> int:
        """Store ``note`` if the checkpoint is still at ``revision``; its new revision, or ``LostRace``."""
        try:
            if revision == 0:
                return await self.kv.create(CHECKPOINT, note.encode())
            return await self.kv.update(CHECKPOINT, note.encode(), last=revision)
        except KeyWrongLastSequenceError:
            raise LostRace(f"the checkpoint of {self.stream} moved past revision {revision}: another integrator runs") from None

    async def set_cosigned(self, note: str) -> None:
        """The checkpoint with the cosignatures its witnesses returned (served instead of it while current)."""
        await self.kv.put(COSIGNED, note.encode())

    async def cosigned(self) -> str | None:
        data, _ = await self._get(COSIGNED)
        return None if data is None else data.decode()

    async def lease(self) -> Lease | None:
        """Who holds the tree, until when (None: nobody ever took it)."""
        data, _ = await self._get(LEASE)
        return None if data is None else Lease(**json.loads(data))

    async def take_lease(self, holder: str, seconds: float) -> bool:
        """Hold the tree for ``seconds`` if it is free, expired or already ours; False when another holds it."""
        data, revision = await self._get(LEASE)
        now = time.time()
        if data is not None:
            lease = Lease(**json.loads(data))
            if lease.holder != holder and lease.until > now:
                return False
        value = json.dumps(asdict(Lease(holder, now + seconds))).encode()
        try:
            if revision == 0:
                await self.kv.create(LEASE, value)
            else:
                await self.kv.update(LEASE, value, last=revision)
        except KeyWrongLastSequenceError:
            return False
        return True

    async def release_lease(self, holder: str) -> None:
        """Give the tree up at once when ``holder`` holds it (a stop, a refusal), rather than when the lease runs out."""
        data, revision = await self._get(LEASE)
        if data is None or Lease(**json.loads(data)).holder != holder:
            return
        with contextlib.suppress(KeyWrongLastSequenceError):  # taken meanwhile: it is another's now
            await self.kv.update(LEASE, json.dumps(asdict(Lease(holder, 0.0))).encode(), last=revision)

    async def set_status(self, status: dict) -> None:
        await self.kv.put(STATUS, json.dumps(status, sort_keys=True).encode())

    async def status(self) -> dict | None:
        data, _ = await self._get(STATUS)
        return None if data is None else json.loads(data)

    async def put_tile(self, path: str, data: bytes) -> None:
        await self.objects.put(self.prefix + path, data)

    async def tile(self, path: str) -> bytes:
        """A stored tile's bytes; ``TileMissing`` when there is none.

        Read chunk by chunk with direct gets rather than ``ObjectStore.get``, which makes an ordered
        consumer for every object (and asks the account's stream names): a reader's permissions and a
        few round trips suffice, and the digest is checked all the same.
        """
        path = self.prefix + path
        try:
            info = await self.objects.get_info(path)
        except (ObjectNotFoundError, ObjectDeletedError, NotFoundError):
            raise TileMissing(f"{path} is not stored in {tiles_bucket(self.stream)}") from None
        js, stream = self.js, object_stream(tiles_bucket(self.stream))
        subject, seq, data = f"$O.{tiles_bucket(self.stream)}.C.{info.nuid}", 0, bytearray()
        for _ in range(info.chunks or 0):
            chunk = await js.get_msg(stream, seq=seq, subject=subject, direct=True, next=True)
            data += chunk.data or b""
            seq = (chunk.seq or 0) + 1
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
        if len(data) != info.size or (info.digest or "").split("=", 1)[-1].rstrip("=") != digest.rstrip("="):
            raise TileMissing(f"{path} in {tiles_bucket(self.stream)} is incomplete or does not match its digest")
        return bytes(data)
