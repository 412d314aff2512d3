"""Placing copies of a stream on a cluster whose peers are still joining: wait for them, not for a cluster too small."""

from __future__ import annotations

import pytest
from nats.js.errors import APIError

from services.log.errors import LogConfigError
from services.log.replication import placed


def _refusal(description: str) -> APIError:
    return APIError(code=500, err_code=10005, description=description)


async def test_a_peer_still_joining_is_waited_for():
    answers = [_refusal("no suitable peers for placement, peer offline"), _refusal("no suitable peers for placement, peer offline"), "made"]

    async def make():
        answer = answers.pop(0)
        if isinstance(answer, APIError):
            raise answer
        return answer

    assert await placed(make, what="stream CLAIMS", wanted=3, wait=5.0) == "made"
    assert answers == []


async def test_a_cluster_too_small_is_refused_at_once_with_what_to_do():
    calls = []

    async def make():
        calls.append(1)
        raise _refusal("insufficient resources")

    with pytest.raises(LogConfigError, match=r"stream CLAIMS needs 3 replicas .*insufficient resources.*claimlog up --cluster 3"):
        await placed(make, what="stream CLAIMS", wanted=3, wait=5.0)
    assert calls == [1]


async def test_peers_that_never_join_are_given_up_on_with_the_reason():
    async def make():
        raise _refusal("no suitable peers for placement, peer offline")

    with pytest.raises(LogConfigError, match="peer offline"):
        await placed(make, what="the token store (bucket claimlog_actors)", wanted=3, wait=0.5)
