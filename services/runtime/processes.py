"""Stopping child processes the same way everywhere: ask first, kill only if they hang."""

from __future__ import annotations

import signal
import subprocess


def terminate(process: subprocess.Popen[bytes] | None, *, timeout: float = 10.0) -> None:
    """SIGTERM the process and wait; SIGKILL it if it has not exited within ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
