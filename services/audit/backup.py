"""``claimlog backup DIR`` and ``claimlog restore DIR``: everything of a registry that no replay can rebuild.

A backup is taken at one point of the log: its head as the backup starts. A directory holds:

- ``log.jsonl``: the log up to that head, as ``claimlog export`` writes it (each event's exact bytes,
  hash, sequence, store time and message id), restored by the same checked, byte-for-byte import;
- ``buckets/<bucket>.snapshot`` and ``buckets/<bucket>.json``: the server's own snapshot of each of the
  registry's key-value buckets not derived from the log (the token store ``claimlog_actors``, and every
  other ``claimlog_<name>`` bucket of the registry, such as its key registry) with the bucket's config
  and state: every revision, deleted ones too, at its sequence and time. They are not the log's, so
  each is taken at a moment of its own: the manifest records the head of the log as it was taken;
- ``keys/``: copies of private key files named to it (the process's CLAIMLOG_SIGNING_KEY, and any other
  ``--key``), each with the path it came from, put back there by a restore where it is missing;
- ``keys.json``: the key registry's document as the backup read it (every key and the requirement);
- ``manifest.json``, written last: the registry (stream, subject prefix, partitions), the head of the
  log (the last sequence in ``log.jsonl``), the buckets and the log's head as each was taken, the keys,
  when, the SHA-256 of every other file, the log's findings against ``keys.json`` (events refused when
  stored), and a signature by the process's key when it is current in the key registry. A directory
  without it is an unfinished backup and is not restored.

A restore reads only files inside the backup, writes keys only inside the data directory or where the
operator names (``--key-to``), and before anything is switched in checks the digests, the manifest's
signature and the log's chains and signatures against ``keys.json`` (services/audit/backup_check.py).

Not kept: what is derived from the log: the read models (a replay rebuilds them) and the slugs' owners
(``claimlog_slugs``, rebuilt from the restored log: a copy taken at another moment would name claims
the restored log does not hold); the partition leases (``claimlog-leases``: which
worker holds which partition, each for seconds; restored, they would name workers that are gone, and
the workers take the partitions anew), and consumers (made by the projector as it starts).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from events import Actor, ActorKind
from services.audit.backup_check import (
    KEY_REGISTRY_FILE,
    BackupTampered,
    check_files,
    check_log,
    check_signature,
    digest,
    inside,
    log_findings,
    signed_part,
)
from services.audit.export import ImportRefused, export_log, import_file, read_export, resumable
from services.commands.slug_rebuild import rebuild_slugs
from services.commands.slugs import SlugOwners
from services.identity.keys import KeyDocument, KeyRing
from services.log import ClaimLog
from services.log.names import ACTORS, KV_PREFIX, SLUGS, actors_bucket, bucket_name, keys_bucket, tlog_bucket
from services.log.shared_state import LazyBucket
from services.log.signing import Signer, sign_document
from services.log.snapshot import restore_stream, snapshot_stream, stream_state
from services.runtime.registry_key import API_ACTOR

FORMAT = 1
MANIFEST = "manifest.json"
LOG_FILE = "log.jsonl"
BUCKETS_DIR = "buckets"
KEYS_DIR = "keys"
RESTORED_STATE = ("messages", "first_seq", "first_ts", "last_seq", "last_ts")  # a bucket restored from its snapshot
Progress = Callable[[int], None]
BUCKET_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")


class BackupRefused(RuntimeError):
    """A backup or restore that was not started: says why (nothing was written)."""


@dataclass(frozen=True)
class Backup:
    """What a backup holds."""

    events: int
    head: int
    buckets: tuple[str, ...]
    keys: tuple[str, ...] = ()
    slugs: int = 0  # the slugs' owners a restore rebuilt from the log
    held: int = 0  # the events a restore that stopped half-way had stored, found to be the backup's and kept
    signed_by: str | None = None  # the key that signed the manifest (None: an unsigned backup, its files unproven)
    kept_key: str | None = None  # the running registry's own delegate key, added to the restored key registry


def registry_buckets(bucket_names: list[str], stream: str) -> list[str]:
    """The key-value buckets of the registry on ``stream`` that the log does not derive: named like its
    token store, ``claimlog_<name>`` (``claimlog_<name>_<stream>`` for a registry on another stream than
    the default), but for the slugs' owners."""
    suffix = actors_bucket(stream).removeprefix(ACTORS)
    pattern = re.compile(rf"claimlog_[a-z0-9]+{re.escape(suffix)}")
    return sorted(name for name in bucket_names if pattern.fullmatch(name) and name not in derived_buckets(stream))


def derived_buckets(stream: str) -> set[str]:
    """The buckets of the registry on ``stream`` rebuilt from its log: never restored from a copy."""
    return {bucket_name(SLUGS, stream)}


async def server_buckets(claim_log: ClaimLog) -> list[str]:
    """Every key-value bucket on the server (its stream ``KV_<bucket>``)."""
    names = [info.config.name for info in await claim_log.nc.jetstream().streams_info()]
    return [name.removeprefix(KV_PREFIX) for name in names if name.startswith(KV_PREFIX)]


async def backup(
    claim_log: ClaimLog, directory: Path, *, key_files: list[Path] = (), log_progress: Progress | None = None,
    bucket_progress: Progress | None = None, signer: Signer | None = None, registry_key: Path | None = None,
    tlog_key: Path | None = None,
) -> Backup:
    """Write the registry's log and buckets, and copies of ``key_files``, to ``directory`` (new, or empty),
    made owner-only: it holds the token hashes, the keys' registry and private keys. The manifest lists
    every file's SHA-256 and the log's findings against the key registry, signed by ``signer`` when its
    key is current there; ``registry_key`` (the data directory's delegate key) is put back in the data
    directory a restore runs with, and so is ``tlog_key`` (the transparency log's key)."""
    keys = _check_keys(list(key_files))
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise BackupRefused(f"{directory} is not an empty directory: a backup goes into a new one")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    head = await claim_log.head()
    buckets = registry_buckets(await server_buckets(claim_log), claim_log.stream)
    (directory / BUCKETS_DIR).mkdir(mode=0o700)
    taken_at = {}
    for bucket in buckets:
        taken_at[bucket] = await claim_log.head()
        meta = await snapshot_stream(claim_log.nc, f"{KV_PREFIX}{bucket}", directory / BUCKETS_DIR / f"{bucket}.snapshot",
                                     progress=bucket_progress)
        with _private(directory / BUCKETS_DIR / f"{bucket}.json") as out:
            json.dump(meta, out, indent=1)
    with _private(directory / LOG_FILE) as out:
        events = await export_log(claim_log, out, progress=log_progress, up_to_seq=head)
    kept_keys = _copy_keys(keys, directory, registry_key=registry_key.resolve() if registry_key else None,
                           tlog_key=tlog_key.resolve() if tlog_key else None)
    ring = await KeyRing.maybe_open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    document = KeyDocument() if ring is None else await ring.document()
    with _private(directory / KEY_REGISTRY_FILE) as out:
        out.write(document.model_dump_json(indent=1))
    manifest = {
        "format": FORMAT,
        "stream": claim_log.stream,
        "subject_prefix": claim_log.layout.prefix,
        "partitions": claim_log.layout.partitions,
        "events": events,
        "head": head,
        "buckets": buckets,
        "buckets_taken_at_head": taken_at,
        "keys": kept_keys,
        "made_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "findings": log_findings(directory / LOG_FILE, document),
        "files": {name: digest(directory / name) for name in _written(directory)},
    }
    if signer is not None and any(r.key_id == signer.key_id and r.retired_at is None for r in document.keys):
        manifest["signature"] = sign_document(signer, signed_part(manifest))
    with _private(directory / MANIFEST) as out:
        json.dump(manifest, out, indent=1)
    return Backup(events, head, tuple(buckets), tuple(key["path"] for key in kept_keys), signed_by=signer.key_id if "signature" in manifest else None)


def _written(directory: Path) -> list[str]:
    """Every file of the backup but its manifest, as paths inside it."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST)


def read_manifest(directory: Path) -> dict:
    """The backup's manifest; a ``BackupRefused`` saying why when the directory is not a whole backup."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except FileNotFoundError:
        raise BackupRefused(f"{directory} has no {MANIFEST}: not a backup, or one that did not finish") from None
    except ValueError as error:
        raise BackupRefused(f"{directory / MANIFEST} is not JSON ({error})") from None
    if manifest.get("format") != FORMAT:
        raise BackupRefused(f"{directory / MANIFEST}: format {manifest.get('format')!r}, this claimlog reads format {FORMAT}")
    for bucket in manifest["buckets"]:
        if not isinstance(bucket, str) or not BUCKET_NAME.fullmatch(bucket):
            raise BackupRefused(f"{directory / MANIFEST} names the bucket {bucket!r}: not a bucket name (letters, digits, _ and -)")
    named = [LOG_FILE, *(f"{BUCKETS_DIR}/{b}.{x}" for b in manifest["buckets"] for x in ("json", "snapshot")),
             *(key["file"] for key in manifest.get("keys", []))]
    try:
        missing = [p for p in named if not inside(directory, p).is_file()]
        if missing:
            raise BackupRefused(f"{directory} misses {', '.join(missing)}: the backup is incomplete")
        if "files" not in manifest:
            raise BackupTampered("the manifest lists no file digests: a backup made before they were kept, or one they were taken out of")
        if set(named) - set(manifest["files"]) or KEY_REGISTRY_FILE not in manifest["files"]:
            raise BackupTampered("the manifest names files its digests do not cover")
        check_files(directory, manifest)
    except BackupTampered as error:
        raise BackupRefused(f"{directory}: {error}") from None
    return manifest


async def restore(
    claim_log: ClaimLog, directory: Path, *, replicas: int, log_progress: Progress | None = None,
    bucket_progress: Progress | None = None, data_dir: Path, key_to: list[Path] = (), registry_key: Path | None = None,
    tlog_key: Path | None = None,
) -> Backup:
    """Restore a backup into a registry that holds nothing yet: its buckets as they were (with ``replicas``
    copies each), then its log, byte for byte at its sequences, then what derives from the log (the
    slugs' owners, rebuilt from it). Everything is checked before anything is written: the manifest,
    every line of the log, the registry's stream and that the stream and the buckets are empty, or hold
    what a restore of this backup that stopped half-way wrote (it continues)."""
    manifest = read_manifest(directory)
    if manifest["stream"] != claim_log.stream:
        raise BackupRefused(
            f"the backup is of the registry on stream {manifest['stream']}, not {claim_log.stream}: "
            f"restore it with CLAIMLOG_STREAM={manifest['stream']}"
        )
    events = sum(1 for _ in read_export(directory / LOG_FILE))  # every line checked (its hash too) before writing
    document, signed_by = _checked_registry(directory, manifest, claim_log.stream)
    existing = set(await server_buckets(claim_log))
    fresh = await _fresh_start(claim_log, existing, registry_key)
    if fresh is not None and await claim_log.head():  # the first start's own key-registry changes, and nothing else:
        await claim_log.nc.jetstream().delete_stream(claim_log.stream)  # they give way to the backup's log, as its
        await claim_log.ensure()  # key registry gives way to the backup's (the key is added again below)
    held = await resumable(claim_log, directory / LOG_FILE, count=events)  # a restore that stopped half-way continues
    fresh = fresh if not held else None
    keys = _keys_to_restore(directory, manifest, data_dir=data_dir, key_to=key_to, registry_key=registry_key, tlog_key=tlog_key, kept=fresh)
    js = claim_log.nc.jetstream()
    derived = derived_buckets(claim_log.stream)
    restored = [bucket for bucket in manifest["buckets"] if bucket not in derived]  # a backup made before they were left out
    for bucket in derived:
        if bucket in existing and (await js.stream_info(f"{KV_PREFIX}{bucket}")).state.messages:
            raise ImportRefused(f"bucket {bucket} is not empty: a backup restores into an empty registry only")
    if fresh is not None:  # the key registry `claimlog up` made in an empty registry gives way to the backup's,
        # and so does the tree of no entries its transparency log began: the backup's log continues the backup's tree
        for made in (keys_bucket(claim_log.stream), tlog_bucket(claim_log.stream)):
            if made in existing:
                await js.delete_stream(f"{KV_PREFIX}{made}")
                existing.discard(made)
    already = [bucket for bucket in restored if await _bucket_restored(claim_log, bucket, directory, existing)]
    for bucket in restored:
        if bucket in already:
            continue
        if bucket in existing:
            await js.delete_stream(f"{KV_PREFIX}{bucket}")  # empty: made by a start before the restore
        meta = _bucket_meta(directory, bucket)
        meta["config"]["num_replicas"] = replicas
        await restore_stream(claim_log.nc, meta, directory / BUCKETS_DIR / f"{bucket}.snapshot", progress=bucket_progress)
    if events > held:
        await import_file(claim_log, directory / LOG_FILE, progress=log_progress, held=held)
    # The key registry as the restored log's own changes give it (the log's word over the bucket's snapshot).
    await (await KeyRing.open(claim_log.nc, replicas=replicas, stream=claim_log.stream, layout=claim_log.layout)).sync()
    if fresh is not None:  # the processes running on it sign with its key: it speaks for the API beside the backup's
        ring = await KeyRing.open(claim_log.nc, replicas=replicas, stream=claim_log.stream, layout=claim_log.layout)
        await ring.add(Actor(id=API_ACTOR, kind=ActorKind.SERVICE), delegate=True, signer=Signer.from_file(fresh))
    slugs = await rebuild_slugs(claim_log, SlugOwners(LazyBucket(claim_log.nc, SLUGS, stream=claim_log.stream, replicas=replicas), claim_log))
    for path, data in keys:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.exists():  # the transparency log key a fresh registry made (_keys_to_restore): set aside
            path.rename(path.with_name(path.name + ".replaced-by-restore"))
        with _private(path, binary=True) as out:
            out.write(data)
    return Backup(
        events, manifest["head"], tuple(restored), tuple(str(path) for path, _ in keys), slugs=slugs, held=held, signed_by=signed_by,
        kept_key=None if fresh is None else str(fresh),
    )


def _checked_registry(directory: Path, manifest: dict, stream: str) -> tuple[KeyDocument, str | None]:
    """The backed-up key registry, with the manifest's signature and the log's chains and signatures checked
    against it (as they held when the backup was made); the key that signed the manifest, or None."""
    try:
        document = KeyDocument.model_validate_json(inside(directory, KEY_REGISTRY_FILE).read_bytes())
        signed_by = check_signature(manifest, document)
        check_log(directory / LOG_FILE, document, manifest.get("findings") or {})
    except ValueError as error:  # BackupTampered, or a key registry file that does not read
        raise BackupRefused(f"{directory}: {error}") from None
    for bucket in manifest["buckets"]:
        if bucket not in registry_buckets([bucket], stream) and bucket not in derived_buckets(stream):
            raise BackupRefused(f"{directory}: the bucket {bucket} is not one of the registry's on stream {stream}")
        name = _bucket_meta(directory, bucket).get("config", {}).get("name")
        if name != f"{KV_PREFIX}{bucket}":
            raise BackupRefused(f"{directory}: {BUCKETS_DIR}/{bucket}.json restores the stream {name!r}, not the bucket's {KV_PREFIX}{bucket}")
    return document, signed_by


def _bucket_meta(directory: Path, bucket: str) -> dict:
    return json.loads(inside(directory, f"{BUCKETS_DIR}/{bucket}.json").read_text())


async def _bucket_restored(claim_log: ClaimLog, bucket: str, directory: Path, existing: set[str]) -> bool:
    """Whether the bucket holds the backup's revisions already (a restore that stopped after it): the same count,
    first and last sequences and store times; a missing or empty one does not, and one holding anything else
    stops the restore before anything is written."""
    if bucket not in existing:
        return False
    state = await stream_state(claim_log.nc, f"{KV_PREFIX}{bucket}")
    if not state["messages"]:
        return False
    kept = _bucket_meta(directory, bucket)["state"]
    if all(state.get(key) == kept.get(key) for key in RESTORED_STATE):
        return True
    raise ImportRefused(
        f"bucket {bucket} is not empty and is not the backup's ({state['messages']} revisions through {state['last_seq']}, "
        f"the last stored at {state.get('last_ts')}; the backup's {kept['messages']} through {kept['last_seq']}, at "
        f"{kept.get('last_ts')}): a backup restores into an empty registry, or continues a restore of it that stopped half-way"
    )


def _check_keys(key_files: list[Path]) -> list[Path]:
    keys = [path.resolve() for path in key_files]
    for path in keys:
        if not path.is_file():
            raise BackupRefused(f"key file {path} is not there (CLAIMLOG_SIGNING_KEY or --key): nothing was written")
    return list(dict.fromkeys(keys))


def _copy_keys(keys: list[Path], directory: Path, *, registry_key: Path | None = None, tlog_key: Path | None = None) -> list[dict]:
    (directory / KEYS_DIR).mkdir(mode=0o700)
    kept = []
    for number, path in enumerate(keys, start=1):
        name = f"{KEYS_DIR}/{number}-{path.name}"
        with _private(directory / name, binary=True) as out:
            out.write(path.read_bytes())
        role = {"registry": True} if path == registry_key else {"tlog": True} if path == tlog_key else {}
        kept.append({"path": str(path), "file": name} | role)
    return kept


async def _fresh_start(claim_log: ClaimLog, existing: set[str], registry_key: Path | None) -> Path | None:
    """The data directory's delegate key when all the registry holds is what `claimlog up` made at its first
    start (a key registry of that one key, and a log of nothing but its changes): a restore replaces that key
    registry and log with the backup's and adds the key to it, so that the processes running on the registry
    keep signing. None otherwise."""
    if registry_key is None or not registry_key.is_file() or keys_bucket(claim_log.stream) not in existing:
        return None
    ring = await KeyRing.maybe_open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    document = KeyDocument() if ring is None else await ring.document()
    try:
        own = Signer.from_file(registry_key).key_id
    except ValueError:
        return None
    if [record.key_id for record in document.keys] != [own]:
        return None
    # The log holds what that start recorded of its key registry (the key, the requirement after 0), or nothing.
    log, logged = await ring.logged()
    made = len(log.stored) == await claim_log.head() and logged.required_after in (None, 0)
    return registry_key if made and [record.key_id for record in logged.keys] in ([], [own]) else None


def _keys_to_restore(
    directory: Path, manifest: dict, *, data_dir: Path, key_to: list[Path] = (), registry_key: Path | None = None,
    tlog_key: Path | None = None, kept: Path | None = None,
) -> list[tuple[Path, bytes]]:
    """The backed-up key files missing at their paths; a different file at a key's path stops the restore. A
    key is written only inside the data directory (the registry's delegate key at ``registry_key``) or at a
    path the operator named (``key_to``); any other path the manifest names stops the restore."""
    allowed = {path.resolve() for path in key_to}
    home = data_dir.resolve()
    missing = []
    for key in manifest.get("keys", []):
        data = inside(directory, key["file"]).read_bytes()
        path = Path(str(key["path"]))
        if key.get("registry") and registry_key is not None:
            path = registry_key  # the restoring data directory's own place for it
        elif key.get("tlog") and tlog_key is not None:
            path = tlog_key
        if key.get("registry") and path == kept:
            continue  # the running registry keeps its own; the backup's public half still verifies its events
        if not (path.resolve().is_relative_to(home) or path.resolve() in allowed):
            raise BackupRefused(
                f"the backup would write the key {key['file']} to {path}, outside the data directory {home}: "
                f"name that path on the command line (--key-to {path}) to write it there"
            )
        if not path.exists():
            missing.append((path, data))
        elif key.get("tlog") and kept is not None and path.is_file() and path.read_bytes() != data:
            # A registry `claimlog up` just made has a transparency log key of its own and a tree of no entries:
            # the backup's log continues the backup's tree, under its key. The new one is set aside, not lost.
            missing.append((path, data))
        elif not path.is_file() or path.read_bytes() != data:
            raise BackupRefused(f"{path} holds another key than the backup's {key['file']}: move it away to restore the backup's")
    return missing


class _private:
    """A file opened for writing, readable by its owner only from its first byte."""

    def __init__(self, path: Path, *, binary: bool = False) -> None:
        self.path, self.binary = path, binary

    def __enter__(self):
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.file = os.fdopen(fd, "wb") if self.binary else os.fdopen(fd, "w", encoding="utf-8")
        return self.file

    def __exit__(self, *exc: object) -> None:
        self.file.close()
