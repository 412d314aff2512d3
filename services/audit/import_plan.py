"""What an import will do with the export's unsigned events and signatures, said before anything is stored.

An event stored where it cannot be attributed never folds: an unsigned one after the registry's signing
requirement, or one signed with a key the registry's key registry does not hold. An import (and the
log of a restore, checked against the key registry it brings back) refuses such a file with the
reason instead of storing events that would silently never fold; otherwise it says how many events
are unsigned and what becomes of them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from events.subjects import REGISTRY
from services.audit.backup_check import logged_registry
from services.audit.export import ImportRefused, read_export
from services.identity.keys import KeyDocument, KeyRing
from services.log import ClaimLog
from services.log.signing import SIGNER


@dataclass(frozen=True)
class ImportPlan:
    """The file's events beyond those already held, and what becomes of the unsigned ones."""

    events: int
    unsigned: int
    required_after: int | None

    def says(self) -> str | None:
        """One sentence on the unsigned events, or None when every event is signed."""
        if not self.unsigned:
            return None
        if self.required_after is None:
            return (f"{self.unsigned} of the {self.events} events are unsigned: they fold as whoever they name, since this "
                    "registry requires no signatures yet (`claimlog actors key require` sets it after them)")
        return (f"{self.unsigned} of the {self.events} events are unsigned and fall at or before sequence {self.required_after}, "
                "after which signatures are required: they fold, and `claimlog verify` counts them unsigned")


async def plan_import(claim_log: ClaimLog, path: Path, *, held: int = 0) -> ImportPlan:
    """Check every event the import would store against the registry's key registry; ``ImportRefused``
    names those that would never fold."""
    logged = logged_registry(path)  # the export's own key-registry changes: the log's word, when it holds them
    if logged is not None:  # its events fold, or are refused, as they were: its registry comes with them
        return check_attributable(path, logged, held=held, own=True)
    ring = await KeyRing.maybe_open(claim_log.nc, stream=claim_log.stream, layout=claim_log.layout)
    return check_attributable(path, KeyDocument() if ring is None else await ring.document(), held=held)


def check_attributable(path: Path, document: KeyDocument, *, held: int = 0, own: bool = False) -> ImportPlan:
    """The plan for storing ``path``'s events after the first ``held`` at sequences ``held + 1`` on; ``own``: the
    file's own key registry (its changes), under which each event is judged as it was where it was exported."""
    keys = {record.key_id for record in document.keys}
    required = document.required_after
    events = unsigned = 0
    late: list[int] = []
    unknown: dict[str, int] = {}
    for position, (_, event) in enumerate(itertools.islice(read_export(path), held, None), start=held + 1):
        if event.claim_id == REGISTRY:
            continue  # a key-registry change: the admin's, unsigned, never folded as a claim's event
        events += 1
        signer = (event.signature or {}).get(SIGNER)
        if signer is None:
            unsigned += 1
            if required is not None and position > required:
                late.append(position)
        elif signer not in keys:
            unknown[signer] = unknown.get(signer, 0) + 1
    if own:
        return ImportPlan(events, unsigned - len(late), required)
    if late:
        raise ImportRefused(
            f"{len(late)} events of {path} are unsigned and would be stored at sequences after {required} (the first at {late[0]}), "
            f"after which this registry requires signatures: they would never fold. Import an unsigned export into a registry "
            "that requires no signatures yet (a new data directory, before its first `claimlog up`), then run `claimlog actors key require`"
        )
    if unknown:
        named = ", ".join(f"{key} ({count} events)" for key, count in sorted(unknown.items()))
        raise ImportRefused(
            f"events of {path} are signed with keys this registry's key registry does not hold: {named}; they would never fold. "
            "Restore the registry's backup instead (it brings its key registry), or add those keys first"
        )
    return ImportPlan(events, unsigned, required)
