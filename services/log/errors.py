"""Errors of the log, each saying what happened and what to do."""

from __future__ import annotations


class LogError(RuntimeError):
    """Something went wrong talking to the log."""


class LogConfigError(LogError):
    """The stream exists but is configured in a way claimlog refuses to run on."""


class PublishError(LogError):
    """JetStream refused an append, for a reason other than a conflict."""


class ConflictError(LogError):
    """Another writer appended to the claim first: the expected sequence is stale."""

    def __init__(self, claim_id: str, expected_seq: int, detail: str) -> None:
        super().__init__(
            f"conflict on {claim_id}: expected its last event at sequence {expected_seq}, "
            f"but the log has moved on ({detail}); read the claim again and retry"
        )
        self.claim_id = claim_id
        self.expected_seq = expected_seq
