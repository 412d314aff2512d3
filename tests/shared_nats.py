"""One nats-server for the run, each test in a NATS account of its own.

An account is a namespace of its own on the server: its own subjects, its own JetStream streams,
consumers and key-value buckets. A test in an account sees nothing of the others, so it may create the
CLAIMS stream on ``claims.>`` and look at the whole log, its head and every consumer as if the server
were its own. Starting a server per test costs a process start, a JetStream store and a stop; taking
an account costs deleting the streams the account's previous test left.

The accounts are taken in turn, so an account comes back only after every other one has been used.
A test that stops, kills, restarts or reconfigures the server, or that needs the role users of the
embedded server (``admin``, ``writer``, ...), takes a server of its own: mark it ``private_nats``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nats
from nats.js.errors import NotFoundError

from services.runtime.embedded import EmbeddedNatsError, nats_server_binary
from services.runtime.processes import terminate

ACCOUNTS = 32


class SharedNats:
    """A nats-server with JetStream and ``ACCOUNTS`` accounts of one user each."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._password = secrets.token_hex(16)
        self._process: subprocess.Popen[bytes] | None = None
        self._address: str | None = None
        self._turns = itertools.cycle(range(ACCOUNTS))

    def start(self, *, timeout: float = 30.0) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "nats-server.conf"
        config.write_text(self._config())
        with open(self.directory / "nats-server.log", "ab") as logfile:
            self._process = subprocess.Popen(
                [str(nats_server_binary()), "-c", str(config)],
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._address = self._wait_for_address(timeout)

    def _config(self) -> str:
        accounts = "\n".join(
            f'  T{n}: {{jetstream: enabled, users: [{{user: "{_user(n)}", password: "{self._password}"}}]}}'
            for n in range(ACCOUNTS)
        )
        return (
            'listen: "127.0.0.1:-1"\n'
            f"ports_file_dir: {json.dumps(str(self.directory))}\n"
            f'jetstream {{\n  store_dir: {json.dumps(str(self.directory / "jetstream"))}\n  sync_interval: "always"\n}}\n'
            f"accounts {{\n{accounts}\n}}\n"
        )

    def _wait_for_address(self, timeout: float) -> str:
        assert self._process is not None
        ports = self.directory / f"nats-server_{self._process.pid}.ports"
        for _ in range(int(timeout / 0.02)):
            if self._process.poll() is not None:
                raise EmbeddedNatsError(f"the shared nats-server exited; see {self.directory / 'nats-server.log'}")
            try:
                return json.loads(ports.read_text())["nats"][0].removeprefix("nats://")
            except (OSError, ValueError, KeyError, IndexError):
                time.sleep(0.02)
        self.stop()
        raise EmbeddedNatsError(f"the shared nats-server did not start within {timeout}s")

    def take(self) -> str:
        """The URL of the next account, emptied of whatever its previous test left in it."""
        if self._address is None:
            raise EmbeddedNatsError("the shared nats-server is not running")
        number = next(self._turns)
        url = f"nats://{_user(number)}:{self._password}@{self._address}"
        with ThreadPoolExecutor(1) as thread:  # its own event loop, whatever runs in this thread
            thread.submit(asyncio.run, _empty(url)).result()
        # The server creates a stream's directory with one mkdir under the account's ``streams``: once in
        # a full run that account directory was found gone after its streams were deleted, and the next
        # test's stream could not be made ("mkdir .../T23/streams: no such file or directory").
        (self.directory / "jetstream" / "jetstream" / f"T{number}" / "streams").mkdir(parents=True, exist_ok=True)
        return url

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process, timeout=10)
            self._process = None


def _user(number: int) -> str:
    return f"t{number}-admin"


async def _empty(url: str) -> None:
    """Delete every stream of the account (the key-value buckets are streams too), consumers with them."""
    nc = await nats.connect(url, connect_timeout=10, max_reconnect_attempts=0)
    try:
        jsm = nc.jetstream()
        for info in await jsm.streams_info():
            with contextlib.suppress(NotFoundError):  # gone with another (a bucket's mirror)
                await jsm.delete_stream(info.config.name)
    finally:
        await nc.close()
