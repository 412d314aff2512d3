"""The key registry as the log's own changes give it: pure, so a reader holding only the log's entries
judges every signature exactly as the registry's gate does."""

from __future__ import annotations

from collections.abc import Iterable

from events.key_registry import RegistryChange, fold_registry
from services.identity.keys import attribution_of, document_of
from services.log.signing import Attribution


def attribution_from_log(changes: Iterable[RegistryChange]) -> Attribution:
    """The ``Attribution`` the registry's changes give, in log order (``RegistryChangeError`` for a change
    that contradicts the ones before it)."""
    return attribution_of(document_of(fold_registry(changes)))
