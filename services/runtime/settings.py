"""The one settings object: read from CLAIMLOG_* environment variables once per process, then passed down."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from events.subjects import DEFAULT_PARTITIONS, DEFAULT_PREFIX, DEFAULT_STREAM, MAX_PARTITIONS, TOKEN

# An origin as browsers send it: scheme and host (and port), no path, not even "/"; or "*" for any.
Origin = Annotated[str, StringConstraints(pattern=r"^(\*|https?://[^/?#\s]+)$")]
Method = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Z]+)$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^(\*|[A-Za-z0-9-]+)$")]


class Settings(BaseSettings):
    """Where the log and the read models live, and how the services run."""

    model_config = SettingsConfigDict(env_prefix="CLAIMLOG_", extra="ignore")

    data_dir: Path = Field(default=Path(".claimlog"), description="Embedded NATS store and SQLite file live here.")
    nats_url: str | None = Field(default=None, description="A NATS server or cluster; unset starts the embedded one.")
    nats_sync: str = Field(
        default="always",
        pattern=r"^(always|[0-9]+(ms|s|m))$",
        description="Embedded server: when JetStream flushes to disk (always = before acknowledging).",
    )
    nats_connect_seconds: float = Field(
        default=10.0, gt=0, le=600, description="How long a process waits for its first connection to NATS before it fails."
    )
    nats_tls_ca: Path | None = Field(
        default=None,
        description="The authority whose certificates the NATS servers present (TLS); unset: the local cluster's own, else none.",
    )
    nats_tls_cert: Path | None = Field(default=None, description="This client's certificate, for NATS servers that ask for one.")
    nats_tls_key: Path | None = Field(default=None, description="The key of CLAIMLOG_NATS_TLS_CERT.")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; unset uses SQLite in data_dir.")
    stream: str = Field(default=DEFAULT_STREAM, pattern=r"^[A-Za-z0-9_-]+$", description="The JetStream stream holding the log.")
    subject_prefix: str = Field(
        default=DEFAULT_PREFIX, pattern=rf"^{TOKEN}$", description="First token of the log's subjects: <prefix>.<claim_id>.<EventType>."
    )
    partitions: int = Field(
        default=DEFAULT_PARTITIONS,
        ge=0,
        le=MAX_PARTITIONS,
        description="Partitions the stream stores claims in, fixed when it is made (0: unpartitioned, as before partitions).",
    )
    tlog_witnesses: str = Field(
        default="",
        description="The transparency log's witnesses: '<url> <vkey>' pairs, comma separated; each new checkpoint is pushed to them.",
    )
    nats_replicas: int = Field(
        default=1, ge=1, le=5,
        description="Copies of everything claimlog keeps on NATS (the log and the token store): 3 on a cluster.",
    )
    duplicate_window_seconds: float = Field(default=300.0, ge=120.0)
    signing_key: Path | None = Field(
        default=None,
        description="The Ed25519 private key (PEM) this process signs its appends with, as `claimlog actors key add` writes it; unset: unsigned.",
    )
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=0, le=65535)
    read_wait_seconds: float = Field(
        default=5.0, ge=0, le=60, description="How long a read with ?after=SEQ waits for the projections."
    )
    projector_name: str = Field(default="projector", pattern=r"^[A-Za-z0-9_-]+$")
    projector_batch: int = Field(default=1000, ge=1, le=10_000)
    lease_seconds: float = Field(
        default=15.0, ge=0.5, le=600,
        description="How long a projector worker's partition lease lives unrenewed: a killed worker's partitions move within it.",
    )
    worker_name: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="This projector worker's name among the workers (unique per live worker); unset: host name and process id.",
    )
    max_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Request bodies over this many bytes are refused with 413, unread."
    )
    max_json_depth: int = Field(
        default=32, ge=2, le=1000, description="JSON bodies nested deeper than this are refused with 422, unparsed."
    )
    rate_limit_per_minute: float = Field(
        default=6000.0, ge=0, description="Writes each actor may make a minute, across every API process of the registry; 0 turns the limit off."
    )
    rate_limit_burst: int = Field(default=1000, ge=1, description="Writes an actor may make at once before the rate applies.")
    live_streams: int = Field(
        default=1_000, ge=1,
        description="Live streams (Server-Sent Events) one API process keeps open at once (503 past it): what bench/live.py finds a process sustains.",
    )
    live_streams_per_client: int = Field(default=16, ge=1, description="Live streams one client address may keep open on one API process.")
    ready_max_lag_events: int = Field(
        default=1000, ge=0, description="/health/ready answers 503 when a projection is more events than this behind the log."
    )
    cors_allow_origins: Annotated[list[Origin], NoDecode] = Field(
        default=[],
        description="Browser frontends on other origins that may call the API (CORS), comma-separated, "
        "e.g. https://registry.example.org; empty (the default) answers no cross-origin request.",
    )
    cors_allow_methods: Annotated[list[Method], NoDecode] = Field(
        default=["GET", "POST"], description="The methods those frontends may use, comma-separated."
    )
    cors_allow_headers: Annotated[list[HeaderName], NoDecode] = Field(
        default=["Authorization", "Content-Type", "Idempotency-Key", "If-Match", "Claimlog-After"],
        description="The request headers those frontends may send, comma-separated.",
    )

    @model_validator(mode="after")
    def _cert_with_key(self) -> Settings:
        if (self.nats_tls_cert is None) != (self.nats_tls_key is None):
            raise ValueError("CLAIMLOG_NATS_TLS_CERT and CLAIMLOG_NATS_TLS_KEY go together: set both, or neither")
        return self

    @field_validator("database_url")
    @classmethod
    def _sqlite_or_postgresql(cls, value: str | None) -> str | None:
        """A URL SQLAlchemy reads, of one of the two databases claimlog keeps its read models in."""
        if value is None:
            return value
        examples = "sqlite:///PATH or postgresql://USER@HOST:5432/DATABASE"
        try:
            backend = make_url(value).get_backend_name()
        except ArgumentError:
            raise ValueError(f"not a database URL; write it as {examples}") from None
        if backend not in ("sqlite", "postgresql"):
            raise ValueError(f"claimlog keeps its read models in SQLite or PostgreSQL, not {backend}: {examples}")
        return value

    @field_validator("cors_allow_origins", "cors_allow_methods", "cors_allow_headers", mode="before")
    @classmethod
    def _listed(cls, value: object) -> object:
        """A list from the environment as commas (``a,b``) or JSON (``["a", "b"]``)."""
        if not isinstance(value, str):
            return value
        text = value.strip()
        return json.loads(text) if text.startswith("[") else [item.strip() for item in text.split(",") if item.strip()]

    def resolved_worker_name(self) -> str:
        """The worker's name: CLAIMLOG_WORKER_NAME, else the host's name and the process id (unique per live process)."""
        if self.worker_name:
            return self.worker_name
        host = re.sub(r"[^A-Za-z0-9_-]+", "-", socket.gethostname()).strip("-")[:40] or "host"
        return f"{host}-{os.getpid()}"

    def resolved_database_url(self) -> str:
        """The database URL, defaulting to SQLite in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'claimlog.sqlite3').resolve()}"
