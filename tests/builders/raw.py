"""Publishing past the writer, as a holder of a NATS publish credential could."""

from __future__ import annotations

import json

from events.registry import encode
from services.log import ClaimLog
from services.log.signing import Signer


async def publish_raw(claim_log: ClaimLog, claim_id: str, event, headers: dict[str, str] | None = None, *, signer: Signer | None = None) -> int:
    """Publish ``event`` chained to the claim's head, with the headers given or signed by ``signer``; its sequence.

    ``event`` is an event, or the JSON object of one as an older schema version stored it (published as it is)."""
    head = await claim_log.claim_head(claim_id)
    if isinstance(event, dict):
        kind, data = event["type"], json.dumps({**event, **({"prev_hash": head.hash} if head.hash else {})}).encode()
    else:
        kind, data = event.type, encode(event.model_copy(update={"prev_hash": head.hash}))
    if signer is not None:
        headers = signer.headers([data])[0]
    ack = await claim_log.nc.jetstream().publish(claim_log.layout.publish_subject(claim_id, kind), data, headers=headers)
    return ack.seq
