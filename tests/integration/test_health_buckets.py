"""``GET /health`` and ``claimlog status`` report on every stream claimlog keeps on NATS: the log and each of
its buckets (tokens, keys, slugs, the rate limit, the partition leases), a bucket not made yet left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from services.runtime.from_settings import ensure_log
from services.runtime.settings import Settings
from tests.integration.command_api import Api

KEPT = {"CLAIMS", "KV_claimlog_actors", "KV_claimlog_slugs", "KV_claimlog_rates", "KV_claimlog-leases"}


async def test_health_and_status_name_the_leases_slugs_and_rates_buckets_beside_the_log(api: Api, settings: Settings):
    await ensure_log(settings)  # what `claimlog up` makes: the slugs', rates' and leases' buckets
    body = (await api.http.get("/health")).json()
    assert set(body["nats"]["streams"]) >= KEPT and body["nats"]["problems"] == [], body["nats"]

    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAIMLOG_")}
    env |= {"CLAIMLOG_NATS_URL": settings.nats_url, "CLAIMLOG_DATABASE_URL": settings.database_url, "CLAIMLOG_DATA_DIR": str(settings.data_dir)}
    done = subprocess.run([sys.executable, "-m", "services.cli", "status", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)["nats"]["streams"]) >= KEPT
