"""What an audit finds wrong."""

from __future__ import annotations


class AuditFailure(Exception):
    """What the log did wrong (or could not be read), and where the evidence is."""


class NotComparable(Exception):
    """The replay's pages cannot be compared with the registry's (other rules, or signatures the replay cannot
    judge): says why. Not evidence against the registry, unlike ``AuditFailure``."""
