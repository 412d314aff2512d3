"""listing and search: a contention count, an index per sort order, and full-text search over statements

Full-text search uses each database's own engine, kept in step with claim_pages by triggers.

PostgreSQL: the column ``statement_search``, the statement's English tsvector, with a GIN index. It is
stored, so that ranking a search that matches most claims does not parse every statement again, and
its triggers parse a statement only when it is new or changed: a generated column or an expression
index would parse it at every event of the claim, since the projector's upsert rewrites the whole row.

SQLite: the FTS5 table ``claim_pages_search`` (porter stemming) with claim_pages as its external
content, keyed by ``first_seq`` (a claim's first log sequence: unique, and never changes, unlike
SQLite's implicit rowid, which VACUUM may renumber). A later migration that makes SQLite recreate
claim_pages (batch "move and copy") drops the triggers with the old table: it must create them again
(``SQLITE_TRIGGERS`` here) and rebuild the index
(``INSERT INTO claim_pages_search(claim_pages_search) VALUES ('rebuild')``).

The read models are emptied and their checkpoints dropped, so the projector rebuilds them from the
log with the new column filled in (they are disposable: the log is the source of truth).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

SORT_INDEXES = {
    'ix_claim_pages_recent': ['last_seq', 'claim_id'],
    'ix_claim_pages_contested': ['contention', 'claim_id'],
    'ix_claim_pages_evidence': ['sources_active', 'claim_id'],
}

SQLITE_SEARCH_TABLE = (
    "CREATE VIRTUAL TABLE claim_pages_search USING fts5(statement, content='claim_pages', "
    "content_rowid='first_seq', tokenize='porter unicode61 remove_diacritics 2')"
)
SQLITE_TRIGGERS = (
    """CREATE TRIGGER claim_pages_search_insert AFTER INSERT ON claim_pages BEGIN
        INSERT INTO claim_pages_search(rowid, statement) VALUES (new.first_seq, new.statement);
    END""",
    # The projector's upsert sets every column: only a statement that changed touches the index.
    """CREATE TRIGGER claim_pages_search_update AFTER UPDATE OF statement, first_seq ON claim_pages
    WHEN old.statement IS NOT new.statement OR old.first_seq IS NOT new.first_seq BEGIN
        INSERT INTO claim_pages_search(claim_pages_search, rowid, statement) VALUES ('delete', old.first_seq, old.statement);
        INSERT INTO claim_pages_search(rowid, statement) VALUES (new.first_seq, new.statement);
    END""",
    """CREATE TRIGGER claim_pages_search_delete AFTER DELETE ON claim_pages BEGIN
        INSERT INTO claim_pages_search(claim_pages_search, rowid, statement) VALUES ('delete', old.first_seq, old.statement);
    END""",
)
POSTGRESQL_SEARCH = (
    "ALTER TABLE claim_pages ADD COLUMN statement_search tsvector",
    """CREATE FUNCTION claim_pages_search_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.statement_search := to_tsvector('english'::regconfig, NEW.statement);
        RETURN NEW;
    END $$""",
    # Not BEFORE INSERT: the upsert's proposed row fires that even when it turns into an update.
    """CREATE FUNCTION claim_pages_search_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE claim_pages SET statement_search = to_tsvector('english'::regconfig, NEW.statement)
        WHERE claim_id = NEW.claim_id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER claim_pages_search_insert AFTER INSERT ON claim_pages
    FOR EACH ROW EXECUTE FUNCTION claim_pages_search_inserted()""",
    """CREATE TRIGGER claim_pages_search_update BEFORE UPDATE OF statement ON claim_pages
    FOR EACH ROW WHEN (OLD.statement IS DISTINCT FROM NEW.statement) EXECUTE FUNCTION claim_pages_search_changed()""",
    "CREATE INDEX ix_claim_pages_statement_search ON claim_pages USING gin (statement_search)",
)


def _rebuild_from_the_log() -> None:
    op.execute('DELETE FROM claim_pages')
    op.execute('DELETE FROM unreadable_events')
    op.execute('DELETE FROM projection_checkpoints')


def upgrade() -> None:
    _rebuild_from_the_log()
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('contention', sa.Integer(), nullable=False))
        batch_op.create_index(batch_op.f('ix_claim_pages_technique'), ['technique'], unique=False)
        batch_op.create_index('ix_claim_pages_first_seq', ['first_seq'], unique=True)
        for name, columns in SORT_INDEXES.items():
            batch_op.create_index(name, columns, unique=False)
    if op.get_bind().dialect.name == 'postgresql':
        for statement in POSTGRESQL_SEARCH:
            op.execute(statement)
    else:
        op.execute(SQLITE_SEARCH_TABLE)
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        for trigger in ('insert', 'update'):
            op.execute(f'DROP TRIGGER IF EXISTS claim_pages_search_{trigger} ON claim_pages')
        for function in ('inserted', 'changed'):
            op.execute(f'DROP FUNCTION IF EXISTS claim_pages_search_{function}()')
        op.execute('DROP INDEX IF EXISTS ix_claim_pages_statement_search')
        op.execute('ALTER TABLE claim_pages DROP COLUMN IF EXISTS statement_search')
    else:
        for trigger in ('insert', 'update', 'delete'):
            op.execute(f'DROP TRIGGER claim_pages_search_{trigger}')
        op.execute('DROP TABLE claim_pages_search')
    _rebuild_from_the_log()
    with op.batch_alter_table('claim_pages', schema=None) as batch_op:
        for name in reversed(SORT_INDEXES):
            batch_op.drop_index(name)
        batch_op.drop_index('ix_claim_pages_first_seq')
        batch_op.drop_index(batch_op.f('ix_claim_pages_technique'))
        batch_op.drop_column('contention')
