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
- ``manifest.json``, written last: the registry (stream, subject prefix, partitions), the head of the
  log (the last sequence in ``log.jsonl``), the buckets and the log's head as each was taken, the keys,
  and when. A directory without it is an unfinished backup and is not restored.

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

from services.audit.export import ImportRefused, export_log, import_file, read_export, resumable
from services.commands.slug_rebuild import rebuild_slugs
from services.commands.slugs import SlugOwners
from services.log import ClaimLog
from services.log.names import ACTORS, KV_PREFIX, SLUGS, actors_bucket, bucket_name
from services.log.shared_state import LazyBucket
from services.log.snapshot import restore_stream, snapshot_stream, stream_state

FORMAT = 1
MANIFEST = "manifest.json"
LOG_FILE = "log.jsonl"
BUCKETS_DIR = "buckets"
KEYS_DIR = "keys"
RESTORED_STATE = ("messages", "first_seq", "first_ts", "last_seq", "last_ts")  # a bucket restored from its snapshot
Progress = Callable[[int], None]


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
    bucket_progress: Progress | None = None,
) -> Backup:
    """Write the registry's log and buckets, and copies of ``key_files``, to ``directory`` (new, or empty),
    made owner-only: it holds the token hashes, the keys' registry and private keys."""
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
    kept_keys = _copy_keys(keys, directory)
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
    }
    with _private(directory / MANIFEST) as out:
        json.dump(manifest, out, indent=1)
    return Backup(events, head, tuple(buckets), tuple(key["path"] for key in kept_keys))


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
    named = [LOG_FILE, *(f"{BUCKETS_DIR}/{b}.{x}" for b in manifest["buckets"] for x in ("json", "snapshot")),
             *(key["file"] for key in manifest.get("keys", []))]
    missing = [p for p in named if not (directory / p).is_file()]
    if missing:
        raise BackupRefused(f"{directory} misses {', '.join(missing)}: the backup is incomplete")
    return manifest


async def restore(
    claim_log: ClaimLog, directory: Path, *, replicas: int, log_progress: Progress | None = None,
    bucket_progress: Progress | None = None,
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
    keys = _keys_to_restore(directory, manifest)
    held = await resumable(claim_log, directory / LOG_FILE, count=events)  # a restore that stopped half-way continues
    existing = set(await server_buckets(claim_log))
    js = claim_log.nc.jetstream()
    derived = derived_buckets(claim_log.stream)
    restored = [bucket for bucket in manifest["buckets"] if bucket not in derived]  # a backup made before they were left out
    for bucket in derived:
        if bucket in existing and (await js.stream_info(f"{KV_PREFIX}{bucket}")).state.messages:
            raise ImportRefused(f"bucket {bucket} is not empty: a backup restores into an empty registry only")
    already = [bucket for bucket in restored if await _bucket_restored(claim_log, bucket, directory, existing)]
    for bucket in restored:
        if bucket in already:
            continue
        if bucket in existing:
            await js.delete_stream(f"{KV_PREFIX}{bucket}")  # empty: made by a start before the restore
        meta = json.loads((directory / BUCKETS_DIR / f"{bucket}.json").read_text())
        meta["config"]["num_replicas"] = replicas
        await restore_stream(claim_log.nc, meta, directory / BUCKETS_DIR / f"{bucket}.snapshot", progress=bucket_progress)
    if events > held:
        await import_file(claim_log, directory / LOG_FILE, progress=log_progress, held=held)
    slugs = await rebuild_slugs(claim_log, SlugOwners(LazyBucket(claim_log.nc, SLUGS, stream=claim_log.stream, replicas=replicas), claim_log))
    for path, data in keys:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with _private(path, binary=True) as out:
            out.write(data)
    return Backup(
        events, manifest["head"], tuple(restored), tuple(str(path) for path, _ in keys), slugs=slugs, held=held
    )


async def _bucket_restored(claim_log: ClaimLog, bucket: str, directory: Path, existing: set[str]) -> bool:
    """Whether the bucket holds the backup's revisions already (a restore that stopped after it): the same count,
    first and last sequences and store times; a missing or empty one does not, and one holding anything else
    stops the restore before anything is written."""
    if bucket not in existing:
        return False
    state = await stream_state(claim_log.nc, f"{KV_PREFIX}{bucket}")
    if not state["messages"]:
        return False
    kept = json.loads((directory / BUCKETS_DIR / f"{bucket}.json").read_text())["state"]
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


def _copy_keys(keys: list[Path], directory: Path) -> list[dict]:
    (directory / KEYS_DIR).mkdir(mode=0o700)
    kept = []
    for number, path in enumerate(keys, start=1):
        name = f"{KEYS_DIR}/{number}-{path.name}"
        with _private(directory / name, binary=True) as out:
            out.write(path.read_bytes())
        kept.append({"path": str(path), "file": name})
    return kept


def _keys_to_restore(directory: Path, manifest: dict) -> list[tuple[Path, bytes]]:
    """The backed-up key files missing at their paths; a different file at a key's path stops the restore."""
    missing = []
    for key in manifest.get("keys", []):
        path, data = Path(key["path"]), (directory / key["file"]).read_bytes()
        if not path.exists():
            missing.append((path, data))
        elif path.read_bytes() != data:
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
