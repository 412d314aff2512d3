"""Ingestion: registry pages (and, later, command files) turned into events on the log."""
