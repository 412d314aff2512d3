"""Checksums of the read-model tables: equal checksums mean a replay rebuilt the same tables."""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, select

from projections.tables import CONTROL_TABLES, metadata


def table_checksums(conn: Connection) -> dict[str, str]:
    """SHA-256 of every read-model table's rows in primary-key order (of its distinct rows, in their own
    order, for a table marked info={"checksum_rows": "distinct"})."""
    sums = {}
    for table in metadata.sorted_tables:
        if table.name in CONTROL_TABLES:
            continue
        digest = hashlib.sha256()
        # A column marked info={"checksum": False} records when something happened, not what the log says.
        columns = [c for c in table.columns if c.info.get("checksum", True)]
        if table.info.get("checksum_rows") == "distinct":
            query = select(*columns).distinct().order_by(*columns)
        else:
            query = select(*columns).order_by(*table.primary_key.columns)
        for row in conn.execute(query):
            digest.update(repr(tuple(row)).encode())
        sums[table.name] = digest.hexdigest()
    return sums
