"""``claimlog audit``'s run: pin the key, audit, report."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from services.auditor.audit import AuditReport, audit
from services.auditor.client import LogClient
from services.auditor.errors import AuditFailure
from services.auditor.mirror import Mirror
from tlog.errors import TlogFormatError
from tlog.vkeys import parse_vkey

if TYPE_CHECKING:
    from services.auditor.replay import Comparison


def audit_directory(base: Path, url: str) -> Path:
    """Each audited log has a directory of its own under ``base``."""
    return base / hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]


async def run_audit(
    url: str, directory: Path, *, key: str | None, witnesses: Sequence[str], per_second: float,
    progress: Callable[[int, int], None], say: Callable[[str], None], client: LogClient | None = None,
    compare_pages: bool = False, sample: int | None = None,
) -> AuditReport:
    """Audit the log at ``url``, mirrored in ``directory``; ``AuditFailure`` names what is wrong. With
    ``compare_pages``, replay every entry into ``directory``'s own database and compare what the registry
    serves as of the checkpoint (every claim, or ``sample`` of them): the report's ``comparison``."""
    mirror = Mirror(directory)
    own = client is None
    client = client or LogClient(url, per_second=per_second)
    try:
        pinned = mirror.vkey()
        if key is not None and pinned is not None and key.strip() != pinned:
            raise AuditFailure(f"the key given is not the one pinned in {directory / 'vkey'} ({pinned})")
        if key is None and pinned is None:
            key = (await client("vkey")).decode().strip()
            say(f"pinned the log's key on first use: {key}")
        chosen = key or pinned
        assert chosen is not None
        try:
            log_key = parse_vkey(chosen)
            cosigners = [parse_vkey(w) for w in witnesses]
        except TlogFormatError as error:
            raise AuditFailure(str(error)) from None
        mirror.pin(chosen)
        try:
            report = await audit(client, mirror, log_key, cosigners, progress=progress)
        except AuditFailure as failure:
            raise AuditFailure(f"{failure}{await _new_identity_hint(client, chosen)}") from None
        if compare_pages:
            report.comparison = await _compare(client, mirror, directory, report.checkpoint.size, sample, progress, say)
        return report
    finally:
        if own:
            await client.close()


async def _new_identity_hint(client: LogClient, pinned: str) -> str:
    """When the registry now serves another log key than the one pinned: what that means and how to go on."""
    try:
        served = (await client("vkey")).decode().strip()
    except Exception:  # noqa: BLE001 - a hint only: the failure stands as it is
        return ""
    if served == pinned:
        return ""
    return (f"; the registry now serves another log key, {served}: if it started a new log identity, that log's "
            "entry 0 names the last checkpoint of the log pinned here; audit it as a new log (--key with that key, "
            "and another --dir) and compare the checkpoint it names with the last one verified here")


async def _compare(
    client: LogClient, mirror: Mirror, directory: Path, size: int, sample: int | None,
    progress: Callable[[int, int], None], say: Callable[[str], None],
) -> Comparison:
    from services.auditor.replay import (  # the fold's stack, loaded only to compare
        compare,
        entry_offset,
        replay,
        replay_keys,
    )

    attribution = replay_keys(mirror, size)
    say(f"replaying {size} entries through the log's admission and folds")
    engine, digests = await replay(mirror, size, directory / "replay.sqlite3", attribution)
    try:  # the registry's pages as of the stream sequence the tree's size covers (one less after a predecessor entry)
        seq = size - entry_offset(mirror, size)
        return await compare(client.json, engine, seq, sample=sample, not_replayable=digests, progress=progress)
    finally:
        engine.dispose()
