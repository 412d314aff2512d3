"""The reverse proxy of deploy/ (deploy/nginx/nginx.conf, run by a real nginx) in front of a real API process:
slow clients are timed out by the proxy, other clients are served meanwhile, and one client address holds
only so many requests at once."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from services.read_api.api_state import api_state
from tests.integration.command_api import Api
from tests.integration.test_live import served

CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "nginx.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"  # Debian's nginx (.ci/run installs it)
HEADER_TIMEOUT = 10  # client_header_timeout of the shipped configuration
PER_CLIENT = 64  # limit_conn per_client


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
async def proxy(api: Api, tmp_path: Path) -> AsyncIterator[str]:
    """The shipped configuration, its upstream the test's API process and its port a free one."""
    port = free_port()
    text = CONFIG.read_text()
    async with served(api) as upstream:
        config = tmp_path / "nginx.conf"
        config.write_text(text.replace("server api:8000;", f"server {upstream.removeprefix('http://')};")
                          .replace("listen 8080;", f"listen 127.0.0.1:{port};"))
        checked = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-c", str(config), "-g", f"pid {tmp_path}/nginx.pid;"],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        process = subprocess.Popen([NGINX, "-p", str(tmp_path), "-c", str(config),
                                    "-g", f"daemon off; pid {tmp_path}/nginx.pid; error_log {tmp_path}/error.log;"])
        try:
            for _ in range(100):
                try:
                    if (await asyncio.to_thread(httpx.get, f"http://127.0.0.1:{port}/health/live", timeout=1)).status_code == 200:
                        break
                except httpx.HTTPError:
                    await asyncio.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait(timeout=10)


def unfinished(port: int) -> socket.socket:
    """A connection that sends half a request's headers and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /health/live HTTP/1.1\r\nHost: claimlog\r\n")
    return sock


def closed_by_the_other_end(sock: socket.socket) -> bool:
    sock.settimeout(1)
    try:
        data = sock.recv(1024)
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 408")


async def test_slow_clients_are_cut_by_the_proxy_while_others_are_served(proxy: str):
    port = int(proxy.rsplit(":", 1)[1])
    slow = [unfinished(port) for _ in range(300)]
    try:
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=proxy, timeout=5) as http:
            served_meanwhile = await http.get("/health/live")
        assert served_meanwhile.status_code == 200 and time.monotonic() - started < 2
        await asyncio.sleep(HEADER_TIMEOUT + 2)
        assert all(closed_by_the_other_end(sock) for sock in slow)
    finally:
        for sock in slow:
            sock.close()


async def test_one_client_address_holds_only_so_many_requests_at_once(api: Api, proxy: str):
    live = api_state(api.app).live
    live.max_streams = live.max_per_client = 1000  # the proxy's cap is the one tested here
    statuses: Counter[int] = Counter()
    opened = asyncio.Event()
    limits = httpx.Limits(max_connections=PER_CLIENT + 20, max_keepalive_connections=0)

    async def stream(http: httpx.AsyncClient) -> None:
        async with http.stream("GET", "/live") as response:
            statuses[response.status_code] += 1
            await opened.wait()

    async with httpx.AsyncClient(base_url=proxy, timeout=10, limits=limits) as http:
        tasks = [asyncio.create_task(stream(http)) for _ in range(PER_CLIENT + 6)]
        for _ in range(100):
            if sum(statuses.values()) == len(tasks):
                break
            await asyncio.sleep(0.1)
        opened.set()
        await asyncio.gather(*tasks)
    assert statuses == {200: PER_CLIENT, 429: 6}
