"""Trust by default: a registry ``claimlog up`` starts signs from its first event, a producer started from a
second terminal signs with the registry's key, and a registry holding unsigned events keeps working and
says that forgery is possible until ``claimlog actors key require``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import nats

from events import Actor
from events.registry import encode
from services.runtime.embedded import running_url
from tests.builders import filed
from tests.e2e.test_up import free_port
from tests.e2e.test_up_again import cli, start, stop, wait_until_up

KEY = Path(".claimlog") / "delegate-key.pem"


async def publish_unsigned(data_dir: Path, event) -> int:
    """Publish an event around the API, unsigned, with the writer credential (anyone holding it can)."""
    nc = await nats.connect(running_url(data_dir, "writer"), inbox_prefix=b"_INBOX.writer")
    try:
        ack = await nc.jetstream().publish(f"claims.{event.claim_id}.{type(event).__name__}", encode(event))
        return ack.seq
    finally:
        await nc.close()


def told(result) -> str:
    """What a command printed, its lines joined as the terminal wrapped them."""
    return " ".join((result.stdout + result.stderr).split())


def test_a_new_registry_signs_from_its_first_event_and_folds_no_forgery(tmp_path: Path):
    port = free_port()
    process, output = start(tmp_path, port, 1)
    try:
        said = wait_until_up(process, output, 90)
        assert "required after sequence 0" in said and "forgery possible" not in said
        key = tmp_path / KEY
        assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        assert health["signing"] == {"required_after": 0, "current_keys": 1}
        ingested = cli(tmp_path, "ingest", "--sample")  # from a second terminal, as the README shows
        assert ingested.returncode == 0, ingested.stdout + ingested.stderr
        page = httpx.get(f"http://127.0.0.1:{port}/claims/CLM-0338?after=1", timeout=30)
        assert page.status_code == 200, page.text  # signed: unsigned events after sequence 0 would never fold
        forged = filed("CLM-0338", "forged-by-bob", actor=Actor(id="bob", kind="person"))
        seq = asyncio.run(publish_unsigned(tmp_path / ".claimlog", forged))
        after = httpx.get(f"http://127.0.0.1:{port}/claims/CLM-0338?after={seq}", timeout=30)
        assert after.status_code == 200
        assert "forged-by-bob" not in after.text
        status = cli(tmp_path, "status")
        assert "required after sequence 0" in told(status), told(status)
    finally:
        stop(process, output)
    exported = cli(tmp_path, "export")
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    # the first start's key-registry changes (the key added, the requirement after 0) are admin's, unsigned
    assert [line["subject"].split(".")[-2:] for line in lines[:2]] == [["_registry", "KeyAdded"], ["_registry", "SigningRequired"]]
    assert all(line.get("signature") for line in lines[2:-1]) and not lines[-1].get("signature")


def test_unsigned_events_are_imported_only_where_they_fold_and_their_registry_warns(tmp_path: Path):
    old, new, third = tmp_path / "old", tmp_path / "new", tmp_path / "third"
    for directory in (old, new, third):
        directory.mkdir()
    assert cli(old, "ingest", "--sample").returncode == 0  # no `claimlog up` yet: no key, nothing signed
    export = tmp_path / "old.jsonl"
    assert cli(old, "export", "--out", str(export)).returncode == 0
    events = len(export.read_text().splitlines())

    process, output = start(new, free_port(), 1)  # a new registry: signatures required after sequence 0
    wait_until_up(process, output, 90)
    stop(process, output)
    refused = cli(new, "import", str(export))  # its log began at its first start: its key registry's changes
    assert refused.returncode == 1
    assert "is not empty and does not begin with" in told(refused) and "nothing was published" in told(refused)

    imported = cli(third, "import", str(export))  # a registry that requires nothing yet: said before it stores
    assert imported.returncode == 0, told(imported)
    assert told(imported).index("are unsigned: they fold as whoever they name") < told(imported).index(f"imported {events} events")

    port = free_port()
    process, output = start(old, port, 1)
    try:
        said = " ".join(wait_until_up(process, output, 90).split())  # the warning's lines as the terminal wrapped them
        assert "forgery possible" in said and "claimlog actors key require" in said
        assert (old / KEY).is_file()  # the API signs from now on
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        assert health["signing"]["required_after"] is None and "claimlog actors key require" in health["signing"]["warning"]
        assert "signing: signatures are not required" in told(cli(old, "status"))
        assert cli(old, "actors", "key", "require").returncode == 0
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json()
        assert health["signing"] == {"required_after": events + 1, "current_keys": 1}  # after the start's KeyAdded
    finally:
        stop(process, output)
