"""Auditing the log: checks that it is whole and unaltered, and moving it in and out as JSON Lines."""
