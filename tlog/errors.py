"""The two ways a transparency log's input can be wrong."""

from __future__ import annotations


class TlogFormatError(ValueError):
    """Text or bytes that do not follow the format they claim (what, where and why in the message)."""


class VerificationError(ValueError):
    """Well-formed input whose signature, proof or hash does not check."""
