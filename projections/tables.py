"""SQL tables of the read models, under one naming convention. Alembic migrations are made from this."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    text,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

checkpoints = Table(
    "projection_checkpoints",
    metadata,
    Column("name", String(64), primary_key=True),
    # The log partition this row is the position of, of ``partitions`` (0 of 1: the whole log, for a
    # projector or a rebuild that folds every partition). How many processes folded the tables is no part
    # of what they say: the checksum leaves it out, and counts a row all the partitions hold once.
    Column("partition", Integer, primary_key=True, server_default="0", info={"checksum": False}),
    Column("version", Integer, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
    Column("partitions", Integer, nullable=False, server_default="1", info={"checksum": False}),
    # The epoch of the worker that owns this partition (its lease's revision; 0 for a projector that
    # owns every partition): a commit with a lower epoch is refused (services/projector/writer.py).
    Column("epoch", BigInteger, nullable=False, server_default="0", info={"checksum": False}),
    info={"checksum_rows": "distinct"},
)

# Each source relation's count column on claim_pages (written by the projection, read by the API).
RELATION_COLUMNS: dict[str, str] = {
    "validates": "sources_validating",
    "supports": "sources_supporting",
    "contradicts": "sources_contradicting",
    "qualifies": "sources_qualifying",
    "mentions": "sources_mentioning",
}

claim_pages = Table(
    "claim_pages",
    metadata,
    Column("claim_id", String(20), primary_key=True),
    Column("slug", String(200), nullable=False, index=True),
    Column("statement", Text, nullable=False),
    Column("statement_key", String(32), nullable=False, index=True),
    Column("capability", String(500), nullable=False),
    Column("technique", String(500), nullable=True, index=True),
    Column("lifecycle", String(12), nullable=False),
    Column("review_state", String(24), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("counts_toward_scorecard", Boolean, nullable=False),
    Column("unreviewed_model_draft", Boolean, nullable=False),
    Column("standing", String(12), nullable=False),
    Column("sources_active", Integer, nullable=False),
    Column("sources_withdrawn", Integer, nullable=False),
    Column("sources_validating", Integer, nullable=False),
    Column("sources_supporting", Integer, nullable=False),
    Column("sources_contradicting", Integer, nullable=False),
    Column("sources_qualifying", Integer, nullable=False),
    Column("sources_mentioning", Integer, nullable=False),
    Column("disagreements_open", Integer, nullable=False),
    Column("disagreements_resolved", Integer, nullable=False),
    Column("reviews_person", Integer, nullable=False),
    Column("reviews_ai", Integer, nullable=False),
    Column("contention", Integer, nullable=False),  # open disagreements + active contradicting sources
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),  # indexed first in ix_claim_pages_recent
    Column("doc", Text, nullable=False),
    Index("ix_claim_pages_scorecard", "capability", "counts_toward_scorecard", "standing"),
    # A capability's listing in id order (the default sort) reads its first page off this index.
    Index("ix_claim_pages_capability_id", "capability", "claim_id"),
    # The listing's sort orders, each ending in claim_id so that keyset pages are stable.
    Index("ix_claim_pages_recent", "last_seq", "claim_id"),
    Index("ix_claim_pages_contested", "contention", "claim_id"),
    Index("ix_claim_pages_evidence", "sources_active", "claim_id"),
    # SQLite's search table keys its rows by the claim's first sequence: unique, and never changes.
    Index("ix_claim_pages_first_seq", "first_seq", unique=True),
)

# A claim's page as it stood after every SNAPSHOT_EVERY-th event of the claim (projections/claim_pages.py):
# an as-of read starts from the last one at or before its point and folds only the claim's events after
# it, instead of all of them. Written by the same fold as the page, in the same transaction; like every
# read model, a replay rebuilds it and ``verify`` checks it.
page_snapshots = Table(
    "page_snapshots",
    metadata,
    Column("claim_id", String(20), primary_key=True),
    Column("seq", BigInteger, primary_key=True),  # the claim's last event the snapshot folds
    Column("at", DateTime(timezone=True), nullable=False),  # when that event was stored
    Column("doc", Text, nullable=False),
)

# Full-text search over statements, in each database's own engine, kept in step with claim_pages by
# triggers (migration 0003). SQLite: the FTS5 table ``claim_pages_search`` (external content, porter
# stemming), into which the claim-pages projection itself inserts new statements (migration 0010).
# PostgreSQL: the column ``statement_search``, the statement's English tsvector, with a GIN index.
# SQLAlchemy cannot declare either (nor should the projector write the column), so Alembic's
# comparison leaves them alone (``alembic_filters``).
SEARCH_CONFIG = text("'english'::regconfig")
SQLITE_SEARCH_TABLE = "claim_pages_search"
SQLITE_SEARCH_TOKENIZE = "porter unicode61 remove_diacritics 2"  # the FTS5 tokenizer of migration 0003
SQLITE_SEARCH_TABLES = frozenset(
    {SQLITE_SEARCH_TABLE, *(f"{SQLITE_SEARCH_TABLE}_{shadow}" for shadow in ("data", "idx", "docsize", "config"))}
)
POSTGRESQL_SEARCH_COLUMN = "statement_search"
POSTGRESQL_SEARCH_INDEX = "ix_claim_pages_statement_search"


unreadable_events = Table(
    "unreadable_events",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("subject", String(300), nullable=False),
    Column("reason", Text, nullable=False),
)


# The event ids each actor has folded on each claim, and the sequence of the event that carried each
# first (projections/repeats.py): a later event of the claim by that actor with one of these ids is a
# repeat (another actor's event with the same id is its own event, folded), recorded in
# unreadable_events and folded by no projection. Written by the projector with every batch, keyed by the
# id first so that a batch's ids are found by one lookup; decided by the log alone, so a replay writes
# the same rows. Without SQLite's rowid, the key is the table (a row per event, half the size).
folded_events = Table(
    "folded_events",
    metadata,
    Column("event_id", String(36), primary_key=True),
    Column("claim_id", String(20), primary_key=True),
    Column("actor_id", String(500), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# Events a projection raised on (a poison event), and every later event of that claim, held back in
# log order until `claimlog parked retry` applies them (services/projector/parking.py). The table owns
# them: the checkpoint moves past them. Parking is decided by the log alone, so a replay parks the same
# events with the same reasons; only when it happened differs, and table checksums leave that out.
parked_events = Table(
    "parked_events",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("claim_id", String(20), nullable=False),
    Column("subject", String(300), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("reason", Text, nullable=False),
    Column("parked_at", DateTime(timezone=True), nullable=False, info={"checksum": False}),
    Index("ix_parked_events_claim_id_seq", "claim_id", "seq"),
)


def alembic_filters(dialect_name: str) -> dict[str, Any]:
    """Options for Alembic's comparison of these tables with a database: leave alone the full-text search
    objects SQLAlchemy cannot declare (SQLite's FTS5 tables, PostgreSQL's tsvector column and its index)."""

    def include_name(name: str | None, type_: str, parent_names: dict) -> bool:
        if dialect_name == "sqlite":
            return not (type_ == "table" and name in SQLITE_SEARCH_TABLES)
        undeclared = {("column", POSTGRESQL_SEARCH_COLUMN), ("index", POSTGRESQL_SEARCH_INDEX)}
        return not (parent_names.get("table_name") == "claim_pages" and (type_, name) in undeclared)

    return {"include_name": include_name}

# The contributors projection: what each actor did, and what became of the sources and disagreements
# they brought (withdrawn or corrected by anyone, resolved by anyone).
contributor_activity = Table(
    "contributor_activity",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("actor_id", String(500), nullable=False),
    Column("actor_kind", String(12), nullable=False),
    Column("actor_model", String(500), nullable=True),
    Column("claim_id", String(20), nullable=False),
    Column("event_type", String(40), nullable=False),
    Column("subject_id", String(64), nullable=True),  # the source, disagreement or review acted on
    Column("at", DateTime(timezone=True), nullable=False),
    Index("ix_contributor_activity_actor", "actor_id", "seq"),
)

contributor_sources = Table(
    "contributor_sources",
    metadata,
    Column("claim_id", String(20), primary_key=True),
    Column("source_id", String(64), primary_key=True),
    Column("brought_by", String(500), nullable=False, index=True),
    Column("relation", String(12), nullable=False),
    Column("withdrawn", Boolean, nullable=False),
    Column("corrections", Integer, nullable=False),
)

contributor_disagreements = Table(
    "contributor_disagreements",
    metadata,
    Column("claim_id", String(20), primary_key=True),
    Column("disagreement_id", String(64), primary_key=True),
    Column("filed_by", String(500), nullable=False, index=True),
    Column("outcome", String(12), nullable=True),  # None while open
)

# Which set of read-model tables ("generation") the API serves and the projector keeps: read from the
# home database only (CLAIMLOG_DATABASE_URL). Generation 0 is the home database's own tables; a replay
# builds generation N beside it (SQLite: a sibling file; PostgreSQL: a schema) and switches to it
# (services/rebuild/generations.py). It exists in every generation's schema, like the others, but is not a
# read model: nothing folds into it and table checksums leave it out.
read_model_generations = Table(
    "read_model_generations",
    metadata,
    Column("generation", Integer, primary_key=True),
    Column("state", String(12), nullable=False),  # building, active, retired, dropped
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("switched_at", DateTime(timezone=True), nullable=True),
)
CONTROL_TABLES = frozenset({read_model_generations.name})
