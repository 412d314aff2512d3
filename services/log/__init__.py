"""The only reader and writer of the claim log on NATS JetStream.

Everything that touches JetStream goes through this package: the stream's configuration and its
refusal of deletes and purges (``stream``), appends with message ids, per-claim expected sequences
and atomic batches (``writer``, and ``pipeline`` for many claims in flight), the per-claim hash chain
(``chain``), reads of one claim's events (``reader``), the projector's durable pull consumer
(``consumer``), and connecting to the servers (``servers``) with claimlog's client (``connection``).
"""

from services.log.chain import event_hash
from services.log.claim_log import ClaimLog
from services.log.consumer import Delivery, DurableConsumer
from services.log.errors import ConflictError, LogConfigError, LogError, PublishError
from services.log.pipeline import Pipeline
from services.log.reader import MAX_SEQ, ClaimHead, StoredEvent, claim_head, read_claim, stream_head
from services.log.servers import NatsTls, connect
from services.log.stream import StreamSpec, ensure_stream
from services.log.writer import Appended, append

__all__ = [
    "MAX_SEQ",
    "Appended",
    "ClaimLog",
    "ClaimHead",
    "ConflictError",
    "Delivery",
    "DurableConsumer",
    "LogConfigError",
    "LogError",
    "Pipeline",
    "PublishError",
    "StoredEvent",
    "StreamSpec",
    "append",
    "claim_head",
    "NatsTls",
    "connect",
    "ensure_stream",
    "event_hash",
    "read_claim",
    "stream_head",
]
