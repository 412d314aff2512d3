"""Connecting to NATS: a bounded wait for the first connection, reconnecting for as long as the process
lives after it, and the URL setting shown without its secrets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from nats.aio.client import Client

from services.log.connection import FastHeadersClient
from services.log.errors import LogError

log = logging.getLogger(__name__)
FIRST_CONNECT_SECONDS = 10.0
REPEAT_QUIET_SECONDS = 10.0  # the same connection error is logged at most this often
INBOX_ROOT = "_INBOX"
_SUBJECT_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
# nats-py upgrades a connection to TLS with ``loop.start_tls`` and a new ``StreamReaderProtocol``, which
# start_tls never tells it is connected: it takes itself to be on plain TCP and asks to stay open at EOF.
# asyncio's SSL protocol closes anyway, and warns with this (its exact text) each time a server ends one.
START_TLS_EOF_WARNING = "returning true from eof_received() has no effect when using ssl"


@dataclass(frozen=True)
class NatsTls:
    """How a client secures its connections to NATS: the authority it trusts for the servers' certificates
    (none: the system's), and its own certificate and key for servers that ask clients for one."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None

    def context(self) -> ssl.SSLContext:
        """A client TLS context that checks the server's certificate and name; a missing or unreadable file
        is a ``LogError`` naming it and its setting."""
        _drop_start_tls_eof_warning()
        try:
            context = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        except (OSError, ssl.SSLError) as error:
            raise LogError(f"cannot read the NATS TLS authority {self.ca} (CLAIMLOG_NATS_TLS_CA): {error}") from None
        if self.cert is not None:
            try:
                context.load_cert_chain(str(self.cert), str(self.key) if self.key else None)
            except (OSError, ssl.SSLError) as error:
                raise LogError(
                    f"cannot read the NATS client certificate {self.cert} with key {self.key} "
                    f"(CLAIMLOG_NATS_TLS_CERT, CLAIMLOG_NATS_TLS_KEY): {error}"
                ) from None
        return context


class _StartTlsEof(logging.Filter):
    """Drops asyncio's warning about nats-py's upgraded connections, and only that."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != START_TLS_EOF_WARNING


def _drop_start_tls_eof_warning() -> None:
    """Filter the warning out of asyncio's log, once in the process (wherever a NATS TLS context is made)."""
    asyncio_log = logging.getLogger("asyncio")
    if not any(isinstance(f, _StartTlsEof) for f in asyncio_log.filters):
        asyncio_log.addFilter(_StartTlsEof())


async def connect(
    url: str,
    *,
    name: str = "claimlog",
    user: str | None = None,
    password: str | None = None,
    first_connect_seconds: float | None = FIRST_CONNECT_SECONDS,
    tls: NatsTls | None = None,
) -> Client:
    """A NATS connection to one server or a cluster. The first connection is given ``first_connect_seconds``
    (a server down, a wrong URL or wrong credentials then end in a ``LogError`` saying which); with ``None``
    it waits until a server answers, each reason it does not logged once in a while (a service's start).
    Once connected, it reconnects for as long as the process lives. With ``tls`` the connection is encrypted
    and the server's certificate checked (a server that requires TLS refuses a client without it)."""
    servers = server_list(url)
    if user is None and password is None:
        servers, user, password = split_credentials(url)
    nc = FastHeadersClient()
    errors = ErrorLog(url, quiet=first_connect_seconds is not None)
    options = dict(
        name=name,
        user=user,
        password=password,
        inbox_prefix=inbox_prefix(user),
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.25,
        connect_timeout=5.0 if first_connect_seconds is None else min(5.0, first_connect_seconds),
        pending_size=64 * 1024 * 1024,
        allow_reconnect=True,
        error_cb=errors.report,
    )
    if tls is not None:
        options["tls"] = tls.context()
    if first_connect_seconds is None:
        try:
            await nc.connect(servers, **options)
        except asyncio.CancelledError:  # stopped while waiting: nothing left retrying
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 1.0)
            raise
        return nc
    try:
        await asyncio.wait_for(nc.connect(servers, **options), first_connect_seconds)
    except TimeoutError:
        reason = nc.last_error
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), 1.0)
        raise LogError(
            f"could not connect to NATS at {redact(url)} within {first_connect_seconds:g}s "
            f"({_describe(reason) if reason else 'no answer'}): is the server running, and are the URL and "
            "its user and password right? (CLAIMLOG_NATS_URL; unset, claimlog runs its embedded server)"
            f"{_tls_hint(reason, tls)}"
        ) from None
    errors.quiet = False  # the first connection's failure says why itself; later ones only the log does
    return nc


def _tls_hint(reason: BaseException | None, tls: NatsTls | None) -> str:
    text = f"{type(reason).__name__} {reason}".lower()
    if not any(word in text for word in ("certificate", "ssl", "tls")):
        return ""
    if tls is None or tls.ca is None:
        return (". The server's TLS certificate is not from an authority this client trusts: set CLAIMLOG_NATS_TLS_CA "
                "to the authority that signed it")
    return f". The server's TLS certificate was refused: is {tls.ca} (CLAIMLOG_NATS_TLS_CA) the authority that signed it?"


def inbox_prefix(user: str | None) -> str:
    """The prefix of a NATS user's reply subjects (``_INBOX.<user>``): each role's replies under a prefix of
    its own, which the server lets only that role subscribe to (services/runtime/nats_roles.py). Without a user
    name fit for a subject, nats-py's default."""
    if user is not None and _SUBJECT_TOKEN.fullmatch(user):
        return f"{INBOX_ROOT}.{user}"
    return INBOX_ROOT


class ErrorLog:
    """A NATS connection's error callback (``report``): one line per error (nats-py logs each with its
    traceback, FastStream none before it is connected), the same one at most every
    ``REPEAT_QUIET_SECONDS`` (a server down is retried four times a second); none while ``quiet``."""

    def __init__(self, url: str, *, quiet: bool = False) -> None:
        self._url, self._last, self.quiet = url, {}, quiet

    async def report(self, error: Exception) -> None:
        message, now = _describe(error), time.monotonic()
        if not self.quiet and now - self._last.get(message, -REPEAT_QUIET_SECONDS) >= REPEAT_QUIET_SECONDS:
            self._last[message] = now
            log.warning("NATS at %s: %s", redact(self._url), message)


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text and not text.startswith("nats:") else text or type(error).__name__


def server_list(url: str) -> list[str]:
    """The servers of a NATS URL setting: one URL, or several separated by commas (a cluster)."""
    return [server.strip() for server in url.split(",") if server.strip()]


def split_credentials(url: str) -> tuple[list[str], str | None, str | None]:
    """The servers of a NATS URL setting without their user and password, and that user and password.

    Passed as options rather than in the URLs, the credentials also reach the servers a cluster
    announces, whose addresses carry none. A URL with a token, or none, is left as it is.
    """
    servers = server_list(url)
    for server in servers:
        parts = urlsplit(server if "://" in server else f"//{server}")
        if parts.username is not None and parts.password is not None:
            return [_without_credentials(s) for s in servers], parts.username, parts.password
    return servers, None, None


def _without_credentials(server: str) -> str:
    scheme, separator, rest = server.partition("://")
    if not separator:
        scheme, rest = "", server
    return f"{scheme}{separator}{rest.rpartition('@')[2]}"


def redact(url: str) -> str:
    """The NATS URL setting fit to print: every password (or token) in it replaced by ``***``."""
    return ",".join(_redact_server(server) for server in url.split(","))


def _redact_server(server: str) -> str:
    scheme, separator, rest = server.partition("://")
    if not separator:
        scheme, rest = "", server
    userinfo, at, address = rest.rpartition("@")
    if not at:
        return server
    user, colon, _ = userinfo.partition(":")
    hidden = f"{user}:***" if colon else "***"  # a bare user part is a token
    return f"{scheme}{separator}{hidden}@{address}"
