"""The deployment files are checked by the tools that will read them."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from services.log.servers import server_list
from services.runtime.embedded import nats_server_binary
from services.runtime.local_ca import issue_certificates
from services.runtime.nats_roles import ROLES, authorization_config, password_variable

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PASSWORDS = {password_variable(role): f"p{role}0secret" for role in ROLES}


NODES = ("nats-1", "nats-2", "nats-3")
MOUNTED_TLS = "/etc/nats/tls/"


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `claimlog certs deploy/tls nats-1 nats-2 nats-3` makes, where the nodes' configs look for it."""
    directory = tmp_path_factory.mktemp("deploy") / "tls"
    issue_certificates(directory, list(NODES))
    return directory


def checkable(config: Path, tls_dir: Path, tmp_path: Path) -> Path:
    """The node's config beside users.conf, reading its certificates from ``tls_dir`` instead of the mount."""
    copy = tmp_path / config.name
    copy.write_text(config.read_text().replace(MOUNTED_TLS, f"{tls_dir}/"))
    (tmp_path / "users.conf").write_text((DEPLOY / "nats" / "users.conf").read_text())
    return copy


@pytest.mark.parametrize("config", sorted((DEPLOY / "nats").glob("nats-*.conf")), ids=lambda p: p.name)
def test_nats_cluster_configs_are_valid_and_flush_before_acknowledging(config: Path, tls_dir: Path, tmp_path: Path):
    result = subprocess.run(
        [str(nats_server_binary()), "-t", "-c", str(checkable(config, tls_dir, tmp_path))],
        capture_output=True, text=True, env={**os.environ, **PASSWORDS},
    )
    assert result.returncode == 0, result.stderr
    assert "sync_interval: always" in config.read_text()
    assert "include ./users.conf" in config.read_text()


@pytest.mark.parametrize("node", NODES)
def test_each_node_serves_its_own_certificate_to_clients_and_on_the_routes_which_check_the_peer_s(node: str):
    text = (DEPLOY / "nats" / f"{node}.conf").read_text()
    client, routes = text.split("\ncluster {")
    own = (f"cert_file: {MOUNTED_TLS}{node}.crt", f"key_file: {MOUNTED_TLS}{node}.key", f"ca_file: {MOUNTED_TLS}ca.pem")
    assert "tls {" in client and all(line in client for line in own) and "verify" not in client
    assert "tls {" in routes and all(line in routes for line in own) and "verify: true" in routes


def test_the_nodes_mount_their_own_key_only_and_the_services_trust_the_authority():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    for node in NODES:
        mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in services[node]["volumes"]}
        keys = {target for target in mounted if target.endswith(".key")}
        assert keys == {f"{MOUNTED_TLS}{node}.key"} and mounted[f"{MOUNTED_TLS}{node}.key"] == f"./tls/{node}.key"
        assert mounted[f"{MOUNTED_TLS}ca.pem"] == "./tls/ca.pem"
    for name in ("stream", "projector", "api"):
        ca = services[name]["environment"]["CLAIMLOG_NATS_TLS_CA"]
        assert f"./tls/ca.pem:{ca}:ro" in services[name]["volumes"]
        assert not any(".key" in volume for volume in services[name]["volumes"])


def test_the_projector_workers_scale_and_get_time_to_hand_over():
    projector = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["projector"]
    assert projector["deploy"]["replicas"] == "${CLAIMLOG_WORKERS:-2}"
    assert "CLAIMLOG_WORKER_NAME" not in projector["environment"]  # each container's host name tells them apart
    assert projector["stop_grace_period"] == "30s"


def test_a_cluster_node_does_not_start_without_every_password(tls_dir: Path, tmp_path: Path):
    config = checkable(DEPLOY / "nats" / "nats-1.conf", tls_dir, tmp_path)
    env = {k: v for k, v in {**os.environ, **PASSWORDS}.items() if k != password_variable("reader")}
    result = subprocess.run([str(nats_server_binary()), "-t", "-c", str(config)], capture_output=True, text=True, env=env)
    assert result.returncode != 0
    assert password_variable("reader") in result.stderr


def test_the_cluster_users_are_the_embedded_servers_roles_with_passwords_from_the_environment():
    rendered = authorization_config("CLAIMS", {role: f"${password_variable(role)}" for role in ROLES})
    assert rendered in (DEPLOY / "nats" / "users.conf").read_text()


def test_each_service_connects_to_every_node_as_its_role():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    for name, role in {"stream": "admin", "projector": "projector", "api": "writer"}.items():
        servers = [urlsplit(s) for s in server_list(services[name]["environment"]["CLAIMLOG_NATS_URL"])]
        assert [s.hostname for s in servers] == ["nats-1", "nats-2", "nats-3"]
        assert {(s.username, s.password) for s in servers} == {(role, f"${{{password_variable(role)}}}")}
    for node in ("nats-1", "nats-2", "nats-3"):
        assert set(services[node]["environment"]) == set(PASSWORDS)
    assert "CLAIMLOG_NATS_URL" not in services["migrate"]["environment"]


def test_the_image_copies_every_package_the_project_installs():
    copied = set(re.findall(r"^COPY (\w+) \1$", (DEPLOY / "Dockerfile").read_text(), flags=re.M))
    assert copied == {"events", "projections", "services", "migrations"}


def test_the_cluster_runs_the_server_version_claimlog_is_tested_with():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    tested = subprocess.run([str(nats_server_binary()), "--version"], capture_output=True, text=True).stdout
    version = re.search(r"v(\d+\.\d+\.\d+)", tested).group(1)
    assert {services[node]["image"] for node in ("nats-1", "nats-2", "nats-3")} == {f"nats:{version}"}


def test_every_service_runs_a_claimlog_command_that_exists_with_every_copy_the_nodes_can_hold():
    from typer.main import get_command

    from services.cli import app

    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    commands = get_command(app).commands
    for name in ("migrate", "projector", "api"):
        words = services[name]["command"]
        command = commands[words[0]]
        if words[0] == "db":
            command = command.commands[words[1]]
        options = {opt for param in command.params for opt in param.opts}
        assert {word for word in words if word.startswith("--")} <= options, name
    nodes = [name for name in services if name.startswith("nats-")]
    assert services["migrate"]["environment"]["CLAIMLOG_NATS_REPLICAS"] == str(len(nodes)) == "3"


def test_claimlog_certs_makes_what_the_nodes_mount_keys_owner_only_the_authority_readable(tmp_path: Path):
    from typer.testing import CliRunner

    from services.cli import app

    directory = tmp_path / "tls"
    result = CliRunner().invoke(app, ["certs", str(directory), *NODES])
    assert result.exit_code == 0, result.output
    assert {p.name for p in directory.iterdir()} == {"ca.pem", "ca-key.pem"} | {f"{n}.{x}" for n in NODES for x in ("crt", "key")}
    modes = {p.name: p.stat().st_mode & 0o777 for p in directory.iterdir()}
    assert modes.pop("ca.pem") == 0o644 and set(modes.values()) == {0o600}
    again = CliRunner().invoke(app, ["certs", str(directory), *NODES])  # kept, not made anew
    assert again.exit_code == 0 and (directory / "nats-1.key").stat().st_mtime == (directory / "nats-1.key").stat().st_mtime


def test_only_the_proxy_is_published_and_it_times_out_headers_and_caps_each_client():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}, published
    assert "./nginx/nginx.conf:/etc/nginx/nginx.conf:ro" in services["proxy"]["volumes"]
    config = (DEPLOY / "nginx" / "nginx.conf").read_text()
    assert re.search(r"client_header_timeout \d+s;", config) and "limit_conn per_client" in config
    assert "server api:8000;" in config and services["api"]["command"][-1] == "8000"
