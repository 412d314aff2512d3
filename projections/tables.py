"""SQL tables of the read models, under one naming convention. Alembic migrations are made from this."""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text

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
    Column("version", Integer, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
)

claim_pages = Table(
    "claim_pages",
    metadata,
    Column("claim_id", String(20), primary_key=True),
    Column("slug", String(200), nullable=False, index=True),
    Column("statement", Text, nullable=False),
    Column("statement_key", String(32), nullable=False, index=True),
    Column("capability", String(500), nullable=False, index=True),
    Column("technique", String(500), nullable=True),
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
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False, index=True),
    Column("doc", Text, nullable=False),
    Index("ix_claim_pages_scorecard", "capability", "counts_toward_scorecard", "standing"),
)

unreadable_events = Table(
    "unreadable_events",
    metadata,
    Column("seq", BigInteger, primary_key=True),
    Column("subject", String(300), nullable=False),
    Column("reason", Text, nullable=False),
)
