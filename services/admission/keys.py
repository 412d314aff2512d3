"""The key registry a reader's gate checks against, read once and kept a few seconds per log connection."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from weakref import WeakKeyDictionary

from services.admission.verdicts import Gate
from services.identity.keys import AttributionCache, load_attribution
from services.log import ClaimLog
from services.log.signing import Attribution

# One cache per ``ClaimLog`` (a process's connection to one stream), with the gate of the registry as last
# read: it remembers the messages it found attributable, so a message read again (an as-of page, the write
# side's state, a history) has its signature checked once per process, not once per read.
_CACHES: WeakKeyDictionary[ClaimLog, tuple[AttributionCache, list[Gate]]] = WeakKeyDictionary()
REMEMBER = 200_000  # messages a reader's gate remembers as attributable (about 20 MB)


async def gate_for(claim_log: ClaimLog, headers: Iterable[Mapping[str, str] | None] = ()) -> Gate:
    """The gate for messages of ``claim_log``: its key registry as read within the last few seconds, read
    again first when ``headers`` (the messages' signature headers) name a key not yet known."""
    fixed = getattr(claim_log, "attribution", None)  # a rebuild worker's, read once by the process feeding it
    if isinstance(fixed, Attribution):
        return Gate(fixed)
    held = _CACHES.get(claim_log)
    if held is None:
        async def load() -> Attribution:
            return await load_attribution(claim_log.nc, stream=claim_log.stream)

        held = _CACHES[claim_log] = (AttributionCache(load), [])
    cache, gates = held
    attribution = await cache.current([h for h in headers if h])  # an unsigned message names no key to look for
    if not gates or not _same_registry(gates[0].attribution, attribution):
        gates[:] = [Gate(attribution, remember=REMEMBER)]  # the registry changed: every verdict is made again
    return gates[0]


def _same_registry(held: Attribution, read: Attribution) -> bool:
    """Whether two readings of the registry judge every message alike (the same keys, retirements and requirement)."""
    return held is read or (held.required_after == read.required_after and held.keys == read.keys)
