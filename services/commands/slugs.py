"""A slug belongs to the first claim that took it.

The command side records each slug's claim in a key-value bucket (``services/commands/shared_state.py``)
before the draft is appended: ``create`` succeeds for one writer only, so of two drafts racing for one
slug, in any API processes, one gets it and the other is refused (409 ``slug_taken``). A draft that
is then refused for another reason gives its slug back. The read side holds the same rule for events
no API decided (a direct producer's): a slug names the claim drafted first with it (the smallest first
sequence), whatever was drafted after.

Slugs of claims drafted before the bucket existed are not in it; the read side still serves their first
owner. The bucket is a lookup for decisions, not a source of truth: rebuilt from the log, it would say
the same (every ``ClaimDrafted``'s slug, first one wins).
"""

from __future__ import annotations

import contextlib

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError

from services.commands.shared_state import SLUGS, LazyBucket


class SlugOwners:
    """Which claim each slug belongs to."""

    def __init__(self, bucket: LazyBucket) -> None:
        self._bucket = bucket

    async def take(self, slug: str, claim_id: str) -> tuple[str, bool]:
        """The slug's owner after trying to take it for ``claim_id``, and whether this call took it."""
        kv = await self._bucket()
        try:
            await kv.create(_key(slug), claim_id.encode())
            return claim_id, True
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await kv.get(_key(slug))
        except (KeyNotFoundError, NotFoundError):  # given back meanwhile: try once more
            return await self.take(slug, claim_id)
        return (entry.value or b"").decode(), False

    async def give_back(self, slug: str, claim_id: str) -> None:
        """Free a slug this claim took for a draft that was then refused (only while it is still its own)."""
        kv = await self._bucket()
        try:
            entry = await kv.get(_key(slug))
        except (KeyNotFoundError, NotFoundError):
            return
        if entry.value == claim_id.encode():
            with contextlib.suppress(KeyWrongLastSequenceError):  # taken again meanwhile: not ours to free
                await kv.delete(_key(slug), last=entry.revision)


def _key(slug: str) -> str:
    return f"slug.{slug}"  # a slug is [a-z0-9-]: safe in a key as it is


__all__ = ["SLUGS", "SlugOwners"]
