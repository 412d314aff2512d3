"""claimlog's deployable processes: the log, the projector, the read API, ingestion and the CLI."""
