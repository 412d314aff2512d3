"""The deployment files are checked by the tools that will read them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from services.embedded import nats_server_binary

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


@pytest.mark.parametrize("config", sorted((DEPLOY / "nats").glob("*.conf")), ids=lambda p: p.name)
def test_nats_cluster_configs_are_valid_and_flush_before_acknowledging(config: Path):
    result = subprocess.run([str(nats_server_binary()), "-t", "-c", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "sync_interval: always" in config.read_text()


def test_the_image_copies_every_package_the_project_installs():
    copied = set(re.findall(r"^COPY (\w+) \1$", (DEPLOY / "Dockerfile").read_text(), flags=re.M))
    assert copied == {"events", "projections", "services", "migrations"}
