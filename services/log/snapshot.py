"""A stream's own snapshot, taken and restored by the server (``$JS.API.STREAM.SNAPSHOT`` / ``RESTORE``).

nats-py has no call for them, so this speaks the server's protocol: a snapshot request names a subject
the server sends the stream's store to in chunks, acknowledged by an empty reply where a chunk asks for one (the server
waits for the acknowledgements, so a slow disk paces it), until an empty message (status 204, or none); a
restore request answers with a subject each chunk is sent to as a request, and an empty request ends
it, answered with the restored stream's info. The snapshot holds everything of the stream: its
messages at their sequences, with their headers, store times and deleted revisions, and its config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import nats.errors
from nats.aio.client import Client

from services.log.errors import LogError

CHUNK_BYTES = 128 * 1024
REQUEST_TIMEOUT = 30.0
Progress = Callable[[int], None]  # bytes so far


async def snapshot_stream(nc: Client, stream: str, out: Path, *, progress: Progress | None = None) -> dict:
    """Write ``stream``'s snapshot to ``out``; returns the server's description of it (``config``, ``state``)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    try:
        request = {"deliver_subject": inbox, "chunk_size": CHUNK_BYTES, "no_consumers": True}
        meta = await _api(nc, f"$JS.API.STREAM.SNAPSHOT.{stream}", request, f"snapshot of {stream}")
        written = 0
        with os.fdopen(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as file:  # owner-only
            while True:
                try:
                    msg = await sub.next_msg(timeout=REQUEST_TIMEOUT)
                except nats.errors.TimeoutError:
                    raise LogError(f"the snapshot of {stream} stopped: no chunk for {REQUEST_TIMEOUT:g}s") from None
                if not msg.data:  # the end: status 204, or no status at all; an error has its code and why
                    status = (msg.headers or {}).get("Status")
                    if status not in (None, "204"):
                        reason = (msg.headers or {}).get("Description", "")
                        raise LogError(f"the snapshot of {stream} failed on the server: {status} {reason}".strip())
                    break
                file.write(msg.data)
                written += len(msg.data)
                if msg.reply:
                    await nc.publish(msg.reply, b"")
                if progress is not None:
                    progress(written)
        return {"config": meta["config"], "state": meta["state"]}
    finally:
        await sub.unsubscribe()


async def restore_stream(nc: Client, meta: dict, snapshot: Path, *, progress: Progress | None = None) -> dict:
    """Restore a snapshot written by ``snapshot_stream`` as the stream ``meta["config"]`` names (which must
    not exist); returns the restored stream's info."""
    name = meta["config"]["name"]
    answer = await _api(nc, f"$JS.API.STREAM.RESTORE.{name}", meta, f"restore of {name}")
    target, sent = answer["deliver_subject"], 0
    with snapshot.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            reply = await nc.request(target, chunk, timeout=REQUEST_TIMEOUT)
            _raise_on_error(reply.data, f"restore of {name}")
            sent += len(chunk)
            if progress is not None:
                progress(sent)
    done = await nc.request(target, b"", timeout=10 * REQUEST_TIMEOUT)
    return _raise_on_error(done.data, f"restore of {name}")


async def stream_state(nc: Client, stream: str) -> dict:
    """The server's own account of a stream's state, as a snapshot's ``meta["state"]`` holds it: counts, and the
    first and last sequences with their store times (nats-py's ``StreamState`` drops the times)."""
    return (await _api(nc, f"$JS.API.STREAM.INFO.{stream}", {}, f"state of {stream}"))["state"]


async def _api(nc: Client, subject: str, request: dict, what: str) -> dict:
    try:
        reply = await nc.request(subject, json.dumps(request).encode(), timeout=REQUEST_TIMEOUT)
    except nats.errors.NoRespondersError:
        raise LogError(f"the {what}: the server has no JetStream to answer it") from None
    return _raise_on_error(reply.data, what)


def _raise_on_error(data: bytes, what: str) -> dict:
    if not data:
        return {}
    answer = json.loads(data)
    if isinstance(answer, dict) and "error" in answer:
        error = answer["error"]
        raise LogError(f"the {what} was refused by the server: {error.get('description', error)} (code {error.get('err_code')})")
    return answer
