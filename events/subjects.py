"""Stream and subject names: the only place subject strings are built.

A producer publishes an event of claim ``C`` and type ``T`` on ``<prefix>.C.T``. A partitioned stream
(the default) stores it as ``<prefix>.<p>.C.T``: the server's own subject transform puts the claim in
partition ``p = partition(N, 1)``, the FNV-1a 32-bit hash of the claim token modulo N. Producers in
any language never compute the partition; readers and consumers filter by it. A stream made before
partitions (``partitions == 0``) stores what was published, ``<prefix>.C.T``.

The claim token ``_registry`` is reserved (``REGISTRY``): no claim id can take it (claim ids are
``CLM-`` and digits), and the key registry's changes (``events/key_registry.py``) are published on
``<prefix>._registry.<Type>``, stored like a claim's in the partition its token hashes to, so each change
is a message of the claim stream and an entry of the transparency log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_STREAM = "CLAIMS"
DEFAULT_PREFIX = "claims"
DEFAULT_PARTITIONS = 16
MAX_PARTITIONS = 1024
ROOT = DEFAULT_PREFIX
ALL_EVENTS = f"{ROOT}.>"

TOKEN = r"[A-Za-z0-9_-]+"
_TOKEN = re.compile(rf"^{TOKEN}$")
REGISTRY = "_registry"  # the claim token the key registry's changes take: never a claim id
_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193


def partition_of_token(token: str, partitions: int) -> int:
    """The partition the server's ``{{partition(N,1)}}`` gives a subject token: FNV-1a 32 of its bytes, mod N."""
    value = _FNV_OFFSET
    for byte in token.encode():
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value % partitions


@dataclass(frozen=True)
class LogLayout:
    """How one registry's events are named: its subject prefix and the stream's fixed number of partitions."""

    prefix: str = DEFAULT_PREFIX
    partitions: int = DEFAULT_PARTITIONS  # 0: the layout before partitions, stored as published

    def __post_init__(self) -> None:
        if not _TOKEN.match(self.prefix):
            raise ValueError(f"subject prefix {self.prefix!r}: one token of letters, digits, '_' or '-'")
        if not 0 <= self.partitions <= MAX_PARTITIONS:
            raise ValueError(f"partitions {self.partitions}: 0 (unpartitioned) to {MAX_PARTITIONS}")

    @property
    def partitioned(self) -> bool:
        return self.partitions > 0

    def publish_subject(self, claim_id: str, event_type: str) -> str:
        """The subject a producer publishes an event on."""
        return f"{self.prefix}.{claim_id}.{event_type}"

    def stored_subject(self, claim_id: str, event_type: str) -> str:
        """The subject the stream stores that event under."""
        if not self.partitioned:
            return self.publish_subject(claim_id, event_type)
        return f"{self.prefix}.{self.partition_of(claim_id)}.{claim_id}.{event_type}"

    def registry_subject(self, change_type: str) -> str:
        """The subject a key-registry change is published on."""
        return self.publish_subject(REGISTRY, change_type)

    def is_registry(self, stored: str) -> bool:
        """Whether a stored subject of this layout is a key-registry change's."""
        tokens = stored.split(".")
        return len(tokens) >= 3 and tokens[-2] == REGISTRY and tokens[0] == self.prefix

    def partition_of(self, claim_id: str) -> int:
        """The claim's partition, as the server computes it (0 when unpartitioned)."""
        return partition_of_token(claim_id, self.partitions) if self.partitioned else 0

    @property
    def all_events(self) -> str:
        """The filter matching every stored event."""
        return f"{self.prefix}.>"

    @property
    def stream_subjects(self) -> list[str]:
        """The subjects the stream listens on: what producers publish."""
        return [f"{self.prefix}.*.*"] if self.partitioned else [self.all_events]

    @property
    def transform(self) -> tuple[str, str] | None:
        """The stream's subject transform (source, destination) that stores each event in its partition."""
        if not self.partitioned:
            return None
        return (
            f"{self.prefix}.*.*",
            f"{self.prefix}.{{{{partition({self.partitions},1)}}}}.{{{{wildcard(1)}}}}.{{{{wildcard(2)}}}}",
        )

    def claim_filter(self, claim_id: str) -> str:
        """The filter matching every stored event of one claim, without knowing its partition (also the
        ``Nats-Expected-Last-Subject-Sequence-Subject`` of an append)."""
        if not self.partitioned:
            return f"{self.prefix}.{claim_id}.*"
        return f"{self.prefix}.*.{claim_id}.*"

    def partition_filter(self, partition: int) -> str:
        """The filter matching every stored event of one partition."""
        if not 0 <= partition < max(self.partitions, 1):
            raise ValueError(f"partition {partition}: the stream has {self.partitions} (0 to {self.partitions - 1})")
        return f"{self.prefix}.{partition}.*.*" if self.partitioned else self.all_events

    def parse(self, stored: str) -> tuple[int, str, str]:
        """``(partition, claim_id, event_type)`` of a stored subject; a ValueError says what it should be."""
        tokens = stored.split(".")
        if self.partitioned and len(tokens) == 4 and tokens[0] == self.prefix and tokens[1].isdigit():
            return int(tokens[1]), tokens[2], tokens[3]
        if not self.partitioned and len(tokens) == 3 and tokens[0] == self.prefix:
            return 0, tokens[1], tokens[2]
        shape = f"{self.prefix}.<partition>.<claim id>.<event type>" if self.partitioned else f"{self.prefix}.<claim id>.<event type>"
        raise ValueError(f"subject {stored!r} is not {shape}")

    def claim_of(self, stored: str) -> str:
        """The claim id a stored subject belongs to."""
        return self.parse(stored)[1]

    def partition_of_subject(self, stored: str) -> int:
        """The partition a stored subject is in."""
        return self.parse(stored)[0]


def exported_subject(subject: str) -> tuple[str, str]:
    """``(claim_id, event_type)`` of a subject as any claimlog log stored it, whatever its prefix and
    partitions: ``<prefix>.<claim>.<Type>`` (unpartitioned) or ``<prefix>.<p>.<claim>.<Type>``."""
    tokens = subject.split(".") if isinstance(subject, str) else []
    if all(_TOKEN.match(token) for token in tokens) and (len(tokens) == 3 or (len(tokens) == 4 and tokens[1].isdigit())):
        return claim_and_type(subject)
    raise ValueError(f"subject {subject!r} is not <prefix>.<claim id>.<event type> nor <prefix>.<partition>.<claim id>.<event type>")


def read_transform(prefix: str, source: str | None, destination: str | None) -> int:
    """The number of partitions a stream's subject transform stores ``prefix``'s events in (0 for none);
    a ValueError for a transform that is not claimlog's."""
    if source is None and destination is None:
        return 0
    pattern = (
        rf"^{re.escape(prefix)}\.\{{\{{\s*partition\(\s*(\d+)\s*,\s*1\s*\)\s*\}}\}}"
        r"\.\{\{\s*wildcard\(\s*1\s*\)\s*\}\}\.\{\{\s*wildcard\(\s*2\s*\)\s*\}\}$"
    )
    found = re.match(pattern, destination or "", flags=re.IGNORECASE)
    if source != f"{prefix}.*.*" or found is None:
        raise ValueError(f"the stream's subject transform {source!r} -> {destination!r} is not claimlog's partitioning of {prefix}")
    return int(found.group(1))


DEFAULT_LAYOUT = LogLayout()
UNPARTITIONED = LogLayout(partitions=0)


def event_subject(claim_id: str, event_type: str) -> str:
    """The subject an event of this claim and type is published on (default prefix)."""
    return DEFAULT_LAYOUT.publish_subject(claim_id, event_type)


def claim_filter(claim_id: str) -> str:
    """The filter matching every stored event of one claim (default layout)."""
    return DEFAULT_LAYOUT.claim_filter(claim_id)


def claim_and_type(subject: str) -> tuple[str, str]:
    """``(claim_id, event_type)`` of a stored subject of any prefix, partitioned or not (a subject of no
    known shape names itself as the claim, its last token as the type)."""
    tokens = subject.split(".")
    if len(tokens) == 4:
        return tokens[2], tokens[3]
    if len(tokens) == 3:
        return tokens[1], tokens[2]
    return subject, tokens[-1]


def is_registry_subject(subject: str) -> bool:
    """Whether a stored subject of any prefix, partitioned or not, is a key-registry change's (the reserved claim token)."""
    tokens = subject.split(".")
    return len(tokens) in (3, 4) and tokens[-2] == REGISTRY


def claim_of(subject: str) -> str:
    """The claim id in a stored subject of any prefix, partitioned or not (a subject of no known shape is its own)."""
    return claim_and_type(subject)[0]
