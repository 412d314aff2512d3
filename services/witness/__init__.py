"""A C2SP tlog-witness v1.0.0 server (``claimlog witness``): it cosigns a log's checkpoint only when it
extends the last one it cosigned for that log, and keeps both checkpoints of any inconsistency.

It imports ``tlog/`` only (and the standard library's sqlite3 for its durable state): what a witness
vouches for follows from the formats alone, never from the log's machinery. It witnesses any log it
is configured for, by origin and verifier key, not only claimlog's.
"""
