"""Ingestion: registry pages and JSON Lines files of commands turned into events on the log.

Registry pages: their text format (``page_format``, ``page_sections``), the importer that turns a page
into events (``importer``), and appending them (``pages``, ``page_batches``). JSON Lines: the lines read
and given their event ids (``bulk_lines``), decided with the write side's own rules and appended in
atomic batches over many claims (``bulk``; ``bulk_pipelined`` for a stream without atomic batches), the
claims a run holds (``bulk_claims``, ``bulk_copies``), and each line's event assembled from its validated
command (``bulk_events``). ``cli`` is the terminal side of ``claimlog ingest``, where the bulk command's
process-wide policy (garbage collection) is set.

Stands on ``services/commands/`` (the rules, claim state, slugs), ``services/identity/`` (who writes),
``services/log/`` and ``services/runtime/``; below the projector, the HTTP app and ``services/cli/``.
"""
