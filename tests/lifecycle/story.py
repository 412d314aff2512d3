"""The life of one registry, told once and run on each deployment (tests/lifecycle/test_*.py subclass it):
thousands of events written through the command API and ``claimlog ingest``, a backup taken while a writer
keeps writing, restored into a fresh server and into a fresh three-node cluster, then a clean stop and a
start, and a kill -9 of every process and a start.

The tests of a class run in order on one registry (module-scoped fixtures, tests/lifecycle/conftest.py): each
leaves it running."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from tests.lifecycle.registry import Registry, Snapshot
from tests.lifecycle.workload import (
    claim_ids,
    drafted_with_sources,
    post,
    post_all,
    reviewed_and_disputed,
    revised_again_and_again,
)

CLAIMS = claim_ids(100000, 1000)
BUSY_CLAIM = CLAIMS[0]
# Every claim drafted with three sources (4,000 events), reviewed and some disputed and related through the API
# (1,534). Before the registry is stopped, one claim is revised 1,200 times: the last thousand events and more
# fall on one partition of the log's sixteen, so the others are idle when it stops.
EVENTS_AT_LEAST = 5000
BUSY_REVISIONS = 1200

# A restore into a registry `claimlog up` made keeps that registry's own key beside the backup's: the log
# records it as one key-registry change (KeyAdded) past the backup's head. A restore into a data directory
# nothing ever started in has no key of its own to keep, and appends nothing.
ADDED_KEY = 1


@dataclass(frozen=True)
class Written:
    """What the story wrote before stopping anything: the tokens, the head, and what a reader saw then."""

    pipeline_token: str
    person_token: str
    head: int
    seen: Snapshot


@dataclass(frozen=True)
class Backup:
    """A backup taken while a writer wrote, and what the original registry showed as of its head."""

    directory: Path
    head: int
    as_of_head: Snapshot
    after_head: list[str]  # the writer's claims drafted after the backup's head


def write_the_registry(registry: Registry) -> Written:
    """The story's writes, by both roads; what a reader sees once the projections have applied them."""
    pipeline = registry.token("pipeline", "model", "--model", "pipeline-1")
    person = registry.token("ada")
    drafted = registry.ingest(drafted_with_sources(CLAIMS), pipeline)
    assert (drafted["accepted"], drafted["rejected"]) == (4 * len(CLAIMS), [])
    post_all(registry.base, person, reviewed_and_disputed(CLAIMS))
    head = registry.caught_up()
    return Written(pipeline, person, head, registry.snapshot())


def revise_the_busy_claim(registry: Registry, written: Written) -> Written:
    """One claim revised again and again through ``claimlog ingest``; what a reader sees then."""
    busy = registry.ingest(revised_again_and_again(BUSY_CLAIM, BUSY_REVISIONS), written.pipeline_token, name="busy.jsonl")
    assert (busy["accepted"], busy["rejected"]) == (BUSY_REVISIONS, [])
    head = registry.caught_up()
    return replace(written, head=head, seen=registry.snapshot())


def without_moment(snapshot: Snapshot) -> Snapshot:
    """The snapshot without the scorecard's ``applied_seq``: as of a sequence it names that sequence, live it
    names the last event that changed the scorecard; everything it counts must still be equal."""
    return replace(snapshot, scorecard={k: v for k, v in snapshot.scorecard.items() if k != "applied_seq"})


def verified_clean(registry: Registry) -> dict:
    """``claimlog verify --json`` on the registry: exit 0 and no findings; its report."""
    verified = registry.claimlog("verify", "--json", timeout=600)
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    report = json.loads(verified.stdout)
    assert report["findings"] == []
    return report


class LifeCycle:
    """The story. A subclass's module provides the fixtures tests/lifecycle/conftest.py names; the subclass
    says how its registry is stopped and how many processes it runs at least."""

    stop_signal = signal.SIGINT
    processes = 4  # claimlog up, its nats-server, the projector and the API

    def test_writes_through_the_command_api_and_ingest_reach_every_page(self, registry: Registry, written: Written):
        assert written.head >= EVENTS_AT_LEAST
        assert [claim["claim_id"] for claim in written.seen.listing] == CLAIMS
        first = written.seen.pages[CLAIMS[0]]
        assert len(first["sources"]) == 3 and first["reviews"][0]["recorded"]["by"]["id"] == "ada"
        assert written.seen.pages[CLAIMS[3]]["disagreements"][0]["state"] == "open"
        assert sum(c["claims_counted"] for c in written.seen.scorecard["capabilities"]) == len(CLAIMS)

    def test_a_backup_taken_while_writing_restores_into_a_fresh_server_as_of_its_head(
        self, backup: Backup, written: Written, fresh_server: Registry
    ):
        restore(fresh_server, backup)
        fresh_server.start()
        self.the_restored_registry_is_the_backup(fresh_server, backup, written, added=0)

    def test_the_same_backup_restores_into_a_fresh_three_node_cluster_as_of_its_head(
        self, backup: Backup, written: Written, fresh_cluster: Registry
    ):
        restore(fresh_cluster, backup)
        self.the_restored_registry_is_the_backup(fresh_cluster, backup, written, added=ADDED_KEY)

    def test_a_stopped_registry_starts_again_ready_with_the_same_pages(self, registry: Registry, busy: Written):
        assert busy.seen.pages[BUSY_CLAIM]["revision"] == 1 + BUSY_REVISIONS
        registry.stop(self.stop_signal)
        registry.start()
        assert registry.caught_up() == busy.head
        assert registry.snapshot() == busy.seen

    def test_a_registry_killed_outright_starts_again_ready_with_the_same_pages_and_verifies_clean(
        self, registry: Registry, busy: Written
    ):
        registry.keep_running()
        killed = registry.kill_everything()
        assert len(killed) >= self.processes
        registry.start()
        assert registry.caught_up() == busy.head
        assert registry.snapshot() == busy.seen
        assert verified_clean(registry)["events"] == busy.head

    @staticmethod
    def the_restored_registry_is_the_backup(target: Registry, backup: Backup, written: Written, *, added: int) -> None:
        """The same listing, pages and scorecard as the original as of the backup's head; ``verify`` clean;
        a second restore refused with nothing changed; the old tokens writing, and nothing of what came
        after the head in the way (the slugs of the claims the writer drafted after it are free). ``added`` is
        how many key-registry changes the restore appended past the backup's head (ADDED_KEY for a target
        `claimlog up` made, 0 for one nothing ever started in)."""
        head = backup.head + added
        assert target.caught_up() == head
        assert without_moment(target.snapshot()) == without_moment(backup.as_of_head)
        assert verified_clean(target)["events"] == head

        again = target.claimlog("restore", str(backup.directory), timeout=600)
        assert again.returncode != 0
        assert "is not empty" in again.stdout + again.stderr and "nothing was restored" in again.stdout + again.stderr
        assert target.head() == head
        assert without_moment(target.snapshot()) == without_moment(backup.as_of_head)

        # The slugs of the claims drafted after the head belong to nobody here: new claims take them.
        drafts = [
            draft | {"claim_id": f"CLM-9{n:05d}"} for n, draft in enumerate(drafted_with_sources(backup.after_head, sources=0))
        ]
        with httpx.Client(base_url=target.base, timeout=60) as client:
            answers = [post(client, written.person_token, draft) for draft in drafts]
            taken = client.post("/commands", json=drafted_with_sources(["CLM-999999"], sources=0)[0] | {"slug": "claim-100000"},
                                headers={"Authorization": f"Bearer {written.person_token}"})
        assert [answer["last_seq"] for answer in answers] == list(range(head + 1, head + 1 + len(drafts)))
        for draft in drafts:
            assert target.page(draft["slug"], after=answers[-1]["last_seq"])["claim_id"] == draft["claim_id"]
        assert (taken.status_code, taken.json()["error"]) == (409, "slug_taken")  # a slug of the backup's is still its claim's


def restore(target: Registry, backup: Backup) -> None:
    """``claimlog restore`` of the backup into the target's data directory."""
    restored = target.claimlog("restore", str(backup.directory), timeout=600)
    assert restored.returncode == 0, restored.stdout[-3000:] + restored.stderr[-3000:]
