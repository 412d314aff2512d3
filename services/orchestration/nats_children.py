"""The nats-servers ``claimlog up`` runs itself, as its supervisor sees them: restarted on their ports and stores.

The embedded single server, or each node of the local cluster, is started (and at the end stopped) by its
owner; when one exits, the supervisor reaps it, says so, and starts it again with backoff, as it does the
projector and the API. It comes back on the same port (the services' URLs name it) and the same store,
so a node rejoins its cluster and catches up, and ``nats.json`` names its new process.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from services.runtime.cluster import LocalCluster
from services.runtime.embedded import EmbeddedNats


@dataclass
class ServerChild:
    """One nats-server of ``claimlog up``, restarted by ``respawn`` when it exits."""

    name: str
    current: Callable[[], subprocess.Popen[bytes] | None] = field(repr=False)
    respawn: Callable[[], None] = field(repr=False)
    restarts: int = 0
    started_at: float = field(default_factory=time.monotonic)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The server's process now (a new one after each restart)."""
        return self.current()

    def start(self) -> None:
        """Start the server again on its port and store."""
        self.respawn()
        self.started_at = time.monotonic()


def nats_children(local: EmbeddedNats | LocalCluster | None) -> list[ServerChild]:
    """The servers of the data directory's own NATS that ``claimlog up`` started; none when it uses another's."""
    if isinstance(local, LocalCluster):
        return [_node(local, node.name) for node in local.nodes]
    if isinstance(local, EmbeddedNats):
        return [ServerChild("nats-server", lambda: local.process, local.restart)]
    return []


def _node(cluster: LocalCluster, name: str) -> ServerChild:
    return ServerChild(f"nats-server {name}", lambda: cluster.processes.get(name), lambda: cluster.restart_node(name))
