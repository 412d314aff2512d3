"""claimlog's NATS client: header blocks published as they are encoded, and many small messages handed straight from the parser."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence

from nats import errors
from nats.aio.client import NATS_HDR_LINE_SIZE, Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from events.log_entry import RESTORED_TIME  # noqa: F401 - the header the log sets on import, named once where the entries name it

log = logging.getLogger(__name__)
_STATUS_MARK = b" "  # "NATS/1.0 100 ..." : a status line from the server (heartbeat, flow control, 404)

# A plain subscription's handler: (subject, reply, data, headers), headers a RawHeaders or nats-py's dict.
Sink = Callable[[str, str, bytes, "RawHeaders | dict[str, str]"], None]


class FastHeadersClient(Client):
    """nats-py's client with two of its private hooks overridden: a header block encoded once is published
    as it is (``_send_publish``), and a plain subscription's messages go straight from the parser to a
    function (``_process_msg``). Both are measured by bench/internals.py against nats-py's own paths;
    tests/unit/test_library_internals.py fails when a nats-py release changes either hook.
    """

    publishes_header_blocks = True  # a header block from ``encode_headers`` is published as it is

    def __init__(self) -> None:
        super().__init__()
        self._sinks: dict[int, Sink] = {}

    def deliver_raw(self, sid: int, sink: Sink | None) -> None:
        """Hand each message of subscription ``sid`` to ``sink`` as soon as it is parsed (None: stop).

        nats-py passes a subscription's messages through a queue of its own and a task that awaits the
        subscription's callback once per message; a consumer that only appends them to its own queue,
        or resolves a future, pays for both at every message (a large share of a replay worker's time,
        and of a bulk ingest's acknowledgements). Such a subscription is made without a callback, and
        its messages come here instead (``subscribe_plain``), as ``(subject, reply, data, headers)``.
        The headers stay as the server sent them (``RawHeaders``), read only by the names asked for:
        a direct get's reply carries about ten, and parsing them all dominated reading a claim; a
        consumer reads none of a stored event's own (``Nats-Msg-Id``, the expected-sequence pair),
        and parsing those was a large part of a replay's receiving time.
        """
        if sink is None:
            self._sinks.pop(sid, None)
        else:
            self._sinks[sid] = sink

    async def _send_publish(self, subject, reply, payload, payload_size, headers):  # noqa: ANN001, ANN202 - nats-py's private hook
        """A header block already encoded (``encode_headers``) goes out as it is; a dictionary, as nats-py sends it.

        nats-py encodes a header dictionary one name at a time, checking each with a regular expression,
        a noticeable part of what a bulk ingest spends on a command; the block is encoded once.
        """
        if not isinstance(headers, bytes):
            return await super()._send_publish(subject, reply, payload, payload_size, headers)
        total = len(headers) + payload_size
        command = b"HPUB %s %s %d %d\r\n" % (subject.encode(), reply.encode(), len(headers), total)  # as nats-py, reply or not
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        await self._send_command(command + headers + payload + b"\r\n")
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()
        return None

    async def publish_blocks(self, messages: Sequence[tuple[str, str, bytes, bytes]]) -> None:
        """Many messages, each ``(subject, reply, header block, payload)``, handed to the connection as one write.

        The messages of an atomic batch go out together anyway; one ``publish`` each costs a coroutine,
        nats-py's checks and an append to its pending buffer per message, a large part of what a bulk
        ingest spent sending a batch. nats-py's checks are made once here: the connection is not closed
        or draining, no payload is over the server's limit, and a disconnected client buffers no more
        than its pending limit. Subjects are not checked again: they are claimlog's own, built from a
        checked claim id and event type.
        """
        if self.is_closed:
            raise errors.ConnectionClosedError
        if self.is_draining_pubs:
            raise errors.ConnectionDrainingError
        parts, size = [], 0
        for subject, reply, headers, payload in messages:
            if len(payload) > self._max_payload:
                raise errors.MaxPayloadError
            total = len(headers) + len(payload)
            parts.append(b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject.encode(), reply.encode(), len(headers), total, headers, payload))
            size += len(payload)
        command = b"".join(parts)
        if not self.is_connected and (self._max_pending_size <= 0 or len(command) + self._pending_data_size > self._max_pending_size):
            raise errors.OutboundBufferLimitError
        self.stats["out_msgs"] += len(parts)
        self.stats["out_bytes"] += size
        await self._send_command(command)
        if self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    async def _process_msg(self, sid, subject, reply, data, headers):  # noqa: ANN001, ANN202 - nats-py's private hook
        sink = self._sinks.get(sid)
        if sink is None:
            return await super()._process_msg(sid, subject, reply, data, headers)
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        try:
            sink(subject.decode(), reply.decode(), data, RawHeaders(headers))
        except Exception:  # as nats-py does with a callback's error: reported, and the connection goes on
            log.exception("handling a message on %s failed", subject.decode(errors="replace"))
        return None


def encode_headers(headers: dict[str, str]) -> bytes:
    """Headers as the block ``FastHeadersClient`` publishes as it is: what nats-py would send for the same
    dictionary (tests/unit/test_log_formats.py compares them). A name or value that would break the block is refused."""
    lines = [b"NATS/1.0\r\n"]
    for name, value in headers.items():
        if not _sendable_name(name) or "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r}: {value!r} cannot be sent")
        lines.append(b"%s: %s\r\n" % (name.encode(), value.strip().encode()))
    lines.append(b"\r\n")
    return b"".join(lines)


@functools.cache
def _sendable_name(name: str) -> bool:
    """Printable ASCII without spaces or a colon (what nats-py's own check allows)."""
    return bool(name) and name.isascii() and name.isprintable() and " " not in name and ":" not in name


class RawHeaders:
    """A message's header block as the server sent it, read one name at a time (``get`` and ``[]``, like the dict).

    ``Status`` and ``Description`` come from the status line (``NATS/1.0 404 No Messages``), as nats-py
    reports them. Of a name given twice, the last wins, as in nats-py's dictionary: a direct get's
    reply has the stored message's own headers first and the server's after them, so a producer's
    forged ``Nats-Sequence`` cannot stand for the server's.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes | None) -> None:
        self._raw = raw or b""

    def get(self, name: str, default: str | None = None) -> str | None:
        raw = self._raw
        if name in ("Status", "Description"):
            if raw[NATS_HDR_LINE_SIZE : NATS_HDR_LINE_SIZE + 1] != _STATUS_MARK:
                return default
            code, _, text = raw[NATS_HDR_LINE_SIZE + 1 : raw.find(b"\r\n")].partition(b" ")
            value = code if name == "Status" else text
            return value.decode("utf-8", "replace") if value else default
        key = _header_key(name)
        at = raw.rfind(key)
        if at < 0:
            return default
        start = at + len(key)
        return raw[start : raw.find(b"\r\n", start)].strip().decode("utf-8", "replace")

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __bool__(self) -> bool:
        return bool(self._raw)


@functools.cache
def _header_key(name: str) -> bytes:
    return b"\r\n" + name.encode("ascii") + b":"


class PlainSubscription:
    """A subscription whose messages go to a plain function, as they are parsed (see ``subscribe_plain``)."""

    def __init__(self, nc: Client, sub: Subscription) -> None:
        self._nc, self._sub = nc, sub
        self.subject = sub.subject

    async def unsubscribe(self) -> None:
        if isinstance(self._nc, FastHeadersClient):
            self._nc.deliver_raw(self._sub._id, None)
        await self._sub.unsubscribe()


async def subscribe_plain(nc: Client, subject: str, sink: Sink) -> PlainSubscription:
    """Subscribe ``sink`` (a function that must not block) to ``subject``: ``sink(subject, reply, data,
    headers)``, the headers a ``RawHeaders`` or nats-py's dictionary (both answer ``get`` and ``[]``).

    On claimlog's connections each message reaches it straight from the parser (``deliver_raw``);
    on any other nats-py client, through the usual callback task.
    """
    if isinstance(nc, FastHeadersClient):
        sub = await nc.subscribe(subject)
        nc.deliver_raw(sub._id, sink)
    else:

        async def callback(msg: Msg) -> None:
            sink(msg.subject, msg.reply, msg.data, msg.headers or {})

        sub = await nc.subscribe(subject, cb=callback)
    return PlainSubscription(nc, sub)
