"""What the life-cycle suite writes: claims drafted with their sources by a pipeline (``claimlog ingest``),
then reviewed, disputed and related by a person through the command API; one claim revised again and again;
and a writer that keeps drafting claims while a backup runs."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

RELATIONS = ("validates", "supports", "contradicts", "qualifies", "mentions")
CAPABILITIES = ("Multi-step arithmetic", "Long-context retrieval", "Code repair", "Chain of inference")


def claim_ids(first: int, count: int) -> list[str]:
    return [f"CLM-{n:06d}" for n in range(first, first + count)]


def drafted_with_sources(claims: list[str], *, sources: int = 3) -> list[dict]:
    """JSON Lines for ``claimlog ingest``: each claim drafted, then ``sources`` sources attached to it."""
    lines = []
    for n, claim_id in enumerate(claims):
        lines.append({
            "command": "draft_claim", "claim_id": claim_id, "slug": f"claim-{claim_id[4:]}",
            "statement": f"Claim {claim_id} holds on benchmark {n % 17} after {n % 5} steps of reasoning.",
            "capability": CAPABILITIES[n % len(CAPABILITIES)], "technique": f"technique-{n % 3}",
            "observed_on": f"benchmark-{n % 17}",
        })
        lines += [
            {"command": "attach_source", "claim_id": claim_id, "source_id": f"s{k}",
             "relation": RELATIONS[(n + k) % len(RELATIONS)], "measured": f"Measured {n * 7 + k} on split {k}."}
            for k in range(1, sources + 1)
        ]
    return lines


def reviewed_and_disputed(claims: list[str], *, seed: int = 7) -> list[dict]:
    """Command API bodies: a review of every claim, a disagreement on every third, a relation on every fifth."""
    rng = random.Random(seed)
    bodies = []
    for n, claim_id in enumerate(claims):
        bodies.append({"command": "record_review", "claim_id": claim_id, "review_id": "r1", "revision": 1,
                       "verdict": rng.choice(["sound", "unsound", "inconclusive"]), "confidence": rng.choice(["low", "medium", "high"])})
        if n % 3 == 0:
            bodies.append({"command": "file_disagreement", "claim_id": claim_id, "disagreement_id": "d1",
                           "argument": f"Split {n % 4} leaks into training data.", "source_id": "s1"})
        if n % 5 == 0 and n + 1 < len(claims):
            bodies.append({"command": "relate_claims", "claim_id": claim_id, "related_claim_id": claims[n + 1]})
    return bodies


def revised_again_and_again(claim_id: str, count: int) -> list[dict]:
    """JSON Lines for ``claimlog ingest``: the claim's statement revised ``count`` times."""
    return [
        {"command": "revise_claim", "claim_id": claim_id, "statement": f"Claim {claim_id} holds on rerun {k}.", "reason": "Rerun."}
        for k in range(1, count + 1)
    ]


def post(client: httpx.Client, token: str, body: dict, *, timeout: float = 120) -> dict:
    """One command through ``POST /commands``, retried while the API asks to wait (429, 503); its answer."""
    deadline = time.monotonic() + timeout
    while True:
        answer = client.post("/commands", json=body, headers={"Authorization": f"Bearer {token}"})
        if answer.status_code not in (429, 503) or time.monotonic() > deadline:
            break
        time.sleep(float(answer.headers.get("Retry-After", "1")))
    assert answer.status_code in (200, 201), (body, answer.status_code, answer.text)
    return answer.json()


def post_all(base: str, token: str, bodies: list[dict], *, threads: int = 8) -> int:
    """Every body through the command API, each claim's commands in order, claims side by side; the last sequence."""
    by_claim: dict[str, list[dict]] = {}
    for body in bodies:
        by_claim.setdefault(body["claim_id"], []).append(body)
    with httpx.Client(base_url=base, timeout=60) as client, ThreadPoolExecutor(threads) as pool:
        answers = pool.map(lambda claim_bodies: [post(client, token, body) for body in claim_bodies], by_claim.values())
        return max(answer["last_seq"] for claim_answers in answers for answer in claim_answers)


class Writer(threading.Thread):
    """Keeps drafting new claims through the command API until stopped; what it wrote is ``written``."""

    def __init__(self, base: str, token: str, *, first: int) -> None:
        super().__init__(name="lifecycle-writer", daemon=True)
        self.base, self.token, self.next = base, token, first
        self.written: list[str] = []
        self.error: BaseException | None = None
        self._stop_asked = threading.Event()

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base, timeout=60) as client:
                while not self._stop_asked.is_set():
                    claim_id = f"CLM-{self.next:06d}"
                    [line] = drafted_with_sources([claim_id], sources=0)
                    post(client, self.token, line)
                    self.written.append(claim_id)
                    self.next += 1
        except BaseException as error:  # noqa: BLE001 - handed to the test, which asserts on it
            self.error = error

    def stop(self) -> list[str]:
        """Stop writing; the claims written. A failed write fails here."""
        self._stop_asked.set()
        self.join(timeout=120)
        assert self.error is None, repr(self.error)
        return self.written
