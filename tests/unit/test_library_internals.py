"""The private parts of nats-py that claimlog's NATS client overrides or reads are still there, as they were.

``services/log/connection.py`` overrides ``Client._send_publish`` and ``Client._process_msg`` and reads a
few attributes they use (bench/internals.py measures what the overrides are worth). pyproject.toml pins
nats-py to the minor release these checks were written against; a release that renames or reshapes any
of them fails here, before a connection misbehaves.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import nats.protocol.parser
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from packaging.requirements import Requirement

from services.log.connection import FastHeadersClient

ROOT = Path(__file__).resolve().parents[2]


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_installed_nats_py_is_within_the_pinned_range():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(Requirement(line) for line in dependencies if Requirement(line).name == "nats-py")
    assert pin.specifier and any(spec.operator == "<" for spec in pin.specifier), "nats-py needs an upper bound"
    assert version("nats-py") in pin.specifier


def test_nats_py_publishes_through_send_publish_with_the_arguments_it_is_overridden_with():
    assert inspect.iscoroutinefunction(Client._send_publish)
    assert _parameters(Client._send_publish) == ["self", "subject", "reply", "payload", "payload_size", "headers"]
    assert _parameters(FastHeadersClient._send_publish) == _parameters(Client._send_publish)
    assert "self._send_publish(subject, reply, payload, payload_size, headers)" in inspect.getsource(Client.publish)


def test_nats_py_hands_parsed_messages_to_process_msg_with_the_arguments_it_is_overridden_with():
    assert inspect.iscoroutinefunction(Client._process_msg)
    assert _parameters(Client._process_msg) == ["self", "sid", "subject", "reply", "data", "headers"]
    assert _parameters(FastHeadersClient._process_msg) == _parameters(Client._process_msg)
    assert "self.nc._process_msg(sid, subject, reply, payload, hdr)" in inspect.getsource(nats.protocol.parser)


def test_the_attributes_the_overrides_use_are_still_there():
    assert _parameters(Client._send_command) == ["self", "cmd", "priority"]
    assert inspect.iscoroutinefunction(Client._flush_pending)
    client = Client()
    assert {"in_msgs", "in_bytes", "out_msgs", "out_bytes"} <= set(client.stats)
    assert hasattr(client, "_flush_queue")
    assert Subscription(client, id=7, subject="x")._id == 7
