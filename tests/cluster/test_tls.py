"""The local cluster speaks TLS only, to clients and between its nodes, with certificates of the data
directory's own authority; claimlog's clients trust it, and nothing else is let in.

A whole ``claimlog up --cluster 3`` over TLS (writes, the projector, the API, ``actors``, ``verify``) is
tests/cluster/test_up_cluster.py."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import stat
from pathlib import Path

import pytest

from services.log import ClaimLog, LogError, NatsTls, StreamSpec, connect
from services.runtime.cluster import LocalCluster
from services.runtime.from_settings import nats_tls
from services.runtime.local_ca import server_certificates
from services.runtime.settings import Settings
from tests.builders import drafted
from tests.conftest import random_claim_id

pytestmark = pytest.mark.cluster


def plain_text_answer(port: int) -> bytes:
    """What a server says to a client that sends CONNECT in plain text after its greeting."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        received = sock.recv(65536)
        sock.sendall(b'CONNECT {"verbose":false,"user":"admin","pass":"x"}\r\nPING\r\n')
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_cluster_serves_clients_over_tls_and_refuses_plain_text(cluster: LocalCluster):
    for node in cluster.nodes:
        greeting, _, rest = plain_text_answer(node.port).partition(b"\r\n")
        assert b'"tls_required":true' in greeting
        assert b"PONG" not in rest  # closed before it answered anything

    async def write_and_read() -> None:
        nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
        try:
            claim_log = ClaimLog(nc, StreamSpec("CLAIMS", replicas=3))
            await claim_log.ensure()
            claim = random_claim_id()
            await claim_log.append(claim, [drafted(claim)], expected_seq=0, prev_hash=None)
            stored = await claim_log.read_log(after_seq=0, limit=10)
            assert [s.event.claim_id for s in stored] == [claim]
        finally:
            await nc.close()

    asyncio.run(write_and_read())


def test_a_client_that_trusts_another_authority_is_refused_and_told_which_setting(cluster: LocalCluster, tmp_path: Path):
    other = server_certificates(tmp_path / "other", ["elsewhere"])["elsewhere"]

    async def attempt(tls: NatsTls | None) -> str:
        with pytest.raises(LogError) as refused:
            await connect(cluster.url_for("admin"), tls=tls, first_connect_seconds=3)
        return str(refused.value)

    assert "CLAIMLOG_NATS_TLS_CA" in asyncio.run(attempt(NatsTls(ca=other.ca)))
    assert "CLAIMLOG_NATS_TLS_CA" in asyncio.run(attempt(None))


def test_the_routes_let_in_only_a_node_with_a_certificate_of_the_cluster_s_authority(cluster: LocalCluster):
    node = cluster.nodes[0]
    with socket.create_connection(("127.0.0.1", node.route_port), timeout=10) as sock:  # plain text: closed at once
        sock.sendall(b'INFO {"server_id":"intruder"}\r\nCONNECT {}\r\nPING\r\n')
        assert sock.recv(65536) == b""
    trusting = ssl.create_default_context(cafile=str(cluster.tls.ca))
    sock = socket.create_connection(("127.0.0.1", node.route_port), timeout=10)  # TLS, but no certificate
    with pytest.raises(ssl.SSLError, match="CERTIFICATE_REQUIRED"), trusting.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"PING\r\n")
        tls.recv(65536)
    sock.close()
    peer = server_certificates(cluster.data_dir, [cluster.nodes[1].name])[cluster.nodes[1].name]
    trusting.load_cert_chain(str(peer.cert), str(peer.key))
    sock = socket.create_connection(("127.0.0.1", node.route_port), timeout=10)  # a node's own: let in
    with trusting.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        assert tls.version() is not None


def test_the_certificates_and_keys_are_owner_only_and_kept_across_restarts(cluster: LocalCluster):
    home = cluster.data_dir / "tls"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    files = sorted(home.iterdir())
    assert {f.name for f in files} == {"ca.pem", "ca-key.pem"} | {f"{n.name}.{x}" for n in cluster.nodes for x in ("crt", "key")}
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    before = {f.name: f.read_bytes() for f in files}
    cluster.stop()
    cluster.start()
    assert {f.name: f.read_bytes() for f in sorted(home.iterdir())} == before
    for node in cluster.nodes:
        config = (node.home / "nats-server.conf").read_text()
        assert config.count("tls {") == 2 and "verify: true" in config  # clients, and the routes (both sides checked)


def test_claimlog_clients_trust_the_data_directorys_authority_unless_told_otherwise(cluster: LocalCluster, tmp_path: Path):
    local = Settings(data_dir=cluster.data_dir)
    assert nats_tls(local) == NatsTls(ca=(cluster.data_dir / "tls" / "ca.pem").resolve())
    own = Settings(data_dir=cluster.data_dir, nats_tls_ca=tmp_path / "ca.pem", nats_tls_cert=tmp_path / "c.pem", nats_tls_key=tmp_path / "k.pem")
    assert nats_tls(own) == NatsTls(tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "k.pem")
    assert nats_tls(Settings(data_dir=tmp_path / "single")) is None  # the embedded single server: plain text on loopback
    with pytest.raises(ValueError, match="CLAIMLOG_NATS_TLS_CERT and CLAIMLOG_NATS_TLS_KEY go together"):
        Settings(nats_tls_cert=tmp_path / "c.pem")


def test_a_tls_connection_closes_without_asyncios_warning_about_eof(cluster: LocalCluster, caplog: pytest.LogCaptureFixture):
    async def connect_and_close() -> None:
        nc = await connect(cluster.url_for("admin"), tls=cluster.tls)
        assert (await nc.jetstream().account_info()).streams >= 0  # the connection works over TLS
        await nc.close()

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        for _ in range(3):
            asyncio.run(connect_and_close())
    assert not [record for record in caplog.records if "eof_received" in record.getMessage()], caplog.text
