"""A registry run as its users run it: ``claimlog up`` in a directory of its own, other ``claimlog`` commands
beside it, and HTTP to the API. Nothing here imports claimlog's code."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.e2e.test_up import free_port

THIS_CHECKOUT = Path(sys.executable).parent / "claimlog"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    except (ProcessLookupError, FileNotFoundError):
        return False


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, however deep (the embedded nats-servers run in process groups of their own)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, frontier = [], [pid]
    while frontier:
        children = parents.get(frontier.pop(), [])
        found += children
        frontier += children
    return found


def wait_until(condition, *, timeout: float, what: str, every: float = 0.2):
    """``condition()``'s first truthy value within ``timeout`` seconds, or an AssertionError naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


def directory_hashes(directory: Path) -> dict[str, str]:
    """Every file below ``directory`` by its path, with the SHA-256 of its bytes."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


@dataclass(frozen=True)
class Snapshot:
    """What a reader sees of a registry: the whole listing, every page (as JSON) and the scorecard."""

    listing: list[dict]
    pages: dict[str, dict]
    scorecard: dict


class Registry:
    """One registry's working directory, its settings, the ``claimlog`` command that runs it and the options
    its operator starts it with (every start the same, as a service file would)."""

    def __init__(
        self, home: Path, *, settings: dict[str, str] | None = None, claimlog: Path = THIS_CHECKOUT, up: tuple[str, ...] = ()
    ) -> None:
        self.home = home
        self.data_dir = home / ".claimlog"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.settings = settings or {}
        self.command = claimlog
        self.up_options = up
        self.process: subprocess.Popen[str] | None = None
        self.log: Path | None = None
        home.mkdir(parents=True, exist_ok=True)

    def env(self, **more: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
        return env | {"COLUMNS": "250", "NO_COLOR": "1"} | self.settings | more

    def claimlog(self, *args: str, timeout: float = 300, **more: str) -> subprocess.CompletedProcess[str]:
        """One ``claimlog`` command in the registry's directory, run to its end."""
        return subprocess.run(
            [str(self.command), *args], cwd=self.home, env=self.env(**more), capture_output=True, text=True, timeout=timeout
        )

    def up(self) -> subprocess.Popen[str]:
        """``claimlog up`` on the registry's port, its output in ``up-<n>.log`` of the directory (beside the data
        directory: the n-th start there, by any release)."""
        self.log = self.home / f"up-{len(list(self.home.glob('up-*.log'))) + 1}.log"
        output = open(self.log, "w")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(
            [str(self.command), "up", "--port", str(self.port), *self.up_options],
            cwd=self.home, env=self.env(), stdout=output, stderr=subprocess.STDOUT, text=True,
        )
        output.close()
        return self.process

    def up_until_it_ends(self, *, timeout: float = 120) -> tuple[int, str]:
        """``claimlog up`` that is expected to end by itself: its exit code and its output, as one line."""
        process = self.up()
        code = process.wait(timeout=timeout)
        self.process = None
        return code, " ".join(self.output().split())

    def output(self) -> str:
        return self.log.read_text() if self.log else ""

    def start(self, *, timeout: float = 180) -> None:
        """``claimlog up`` until the API says it is ready."""
        self.up()
        self.wait_ready(timeout=timeout)

    def keep_running(self) -> None:
        """Started again if an earlier step left it stopped (that step has failed already and said why)."""
        if self.process is None or self.process.poll() is not None:
            self.start()

    def ready(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"claimlog up exited:\n{self.output()[-3000:]}"
        try:
            return httpx.get(f"{self.base}/health/ready", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, *, timeout: float = 180) -> None:
        try:
            wait_until(self.ready, timeout=timeout, what=f"{self.base}/health/ready answering 200", every=0.5)
        except AssertionError as error:
            raise AssertionError(f"{error}; the last answer: {self.last_ready_answer()}") from None

    def last_ready_answer(self) -> str:
        try:
            return httpx.get(f"{self.base}/health/ready", timeout=5).text[:2000]
        except httpx.HTTPError as error:
            return repr(error)

    def stop(self, stop_signal: signal.Signals = signal.SIGINT) -> str:
        """Stop ``claimlog up`` as Ctrl-C (or a service manager's SIGTERM) does; it must end cleanly."""
        assert self.process is not None
        self.process.send_signal(stop_signal)
        code = self.process.wait(timeout=90)
        output = self.output()
        assert code == 0, output[-3000:]
        assert "claimlog stopped" in output
        self.process = None
        return output

    def kill_everything(self) -> list[int]:
        """SIGKILL to ``claimlog up`` and every process below it at once, as a power cut would; their pids."""
        assert self.process is not None
        tree = [self.process.pid, *descendants(self.process.pid)]
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None
        wait_until(lambda: not any(alive(pid) for pid in tree), timeout=30, what="every killed process gone")
        return tree

    def close(self) -> None:
        """Whatever still runs of the registry, stopped (or killed): a test that failed leaves nothing behind."""
        if self.process is not None and self.process.poll() is None:
            tree = [self.process.pid, *descendants(self.process.pid)]
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=60)
            for pid in tree:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        self.process = None
        for pid in self.nats_pids():  # left by an ``up`` that died without stopping them
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    def nats_pids(self) -> list[int]:
        """The nats-servers ``nats.json`` of the data directory names as running."""
        try:
            running = json.loads((self.data_dir / "nats.json").read_text())
        except FileNotFoundError:
            return []
        return running.get("pids") or ([running["pid"]] if "pid" in running else [])

    # Writing

    def token(self, actor: str, kind: str = "person", *more: str) -> str:
        """A new bearer token for ``actor``, as ``claimlog actors add`` prints it."""
        added = self.claimlog("actors", "add", actor, "--kind", kind, *more)
        assert added.returncode == 0, added.stderr
        return added.stdout.strip().splitlines()[-1]

    def ingest(self, lines: list[dict], token: str, *, name: str = "commands.jsonl") -> dict:
        """``claimlog ingest`` of the lines as a JSON Lines file; its report."""
        path = self.home / name
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        report = self.home / f"{name}.report.json"
        done = self.claimlog("ingest", str(path), "--report", str(report), timeout=600, CLAIMLOG_TOKEN=token)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return json.loads(report.read_text())

    # Reading

    def get(self, path: str, **params) -> httpx.Response:
        return httpx.get(f"{self.base}{path}", params=params, timeout=30)

    def head(self) -> int:
        """The head of the log, as ``/health`` reports it (it says null while the log does not answer within
        its two seconds, as on a loaded machine: asked again then)."""
        return wait_until(lambda: self.get("/health").json()["head"], timeout=60, what="/health knowing the log's head")

    def caught_up(self, *, timeout: float = 180) -> int:
        """The head of the log once every projection has applied it (a read with ``?after=`` the head)."""
        head = self.head()
        wait_until(lambda: self.get("/claims", after=head, limit=1).status_code == 200, timeout=timeout,
                   what=f"the projections applying the log's head {head}")
        return head

    def listing(self, **params) -> list[dict]:
        """Every claim of the listing (closed ones too), page after page."""
        claims, cursor = [], None
        while True:
            answer = self.get("/claims", include_closed="true", sort="id", limit=200, **params, **({"cursor": cursor} if cursor else {}))
            assert answer.status_code == 200, answer.text
            body = answer.json()
            claims += body["items"]
            if not (cursor := body["next_cursor"]):
                return claims

    def page(self, claim_id: str, **params) -> dict:
        answer = self.get(f"/claims/{claim_id}", **params)
        assert answer.status_code == 200, (claim_id, answer.text)
        return answer.json()

    def snapshot(self, claim_ids: list[str] | None = None, *, as_of_seq: int | None = None) -> Snapshot:
        """The listing, the pages of ``claim_ids`` (every claim listed, if None) and the scorecard; as they stand,
        or as they stood at ``as_of_seq``."""
        at = {} if as_of_seq is None else {"as_of_seq": as_of_seq}
        listing = self.listing(**at)
        ids = [claim["claim_id"] for claim in listing] if claim_ids is None else claim_ids
        scorecard = self.get("/scorecard", **at)
        assert scorecard.status_code == 200, scorecard.text
        with httpx.Client(base_url=self.base, timeout=60) as client:
            pages = {claim_id: _page(client, claim_id, at) for claim_id in ids}
        return Snapshot(listing, pages, scorecard.json())


def _page(client: httpx.Client, claim_id: str, params: dict) -> dict:
    answer = client.get(f"/claims/{claim_id}", params=params)
    assert answer.status_code == 200, (claim_id, answer.text)
    return answer.json()


def running(registries: list[Registry]) -> Iterator[None]:
    """Closes every registry at the end, whatever happened."""
    try:
        yield
    finally:
        for registry in registries:
            registry.close()
