"""What ``claimlog up`` announces points at pages the registry serves, with the sample pages loaded or without."""

from __future__ import annotations

import re

import pytest

from services.orchestration import up
from services.runtime.settings import Settings
from tests.integration.command_api import Api

BASE = "http://claimlog"  # the command API's test client answers there


def announced(settings: Settings, *, sample: bool) -> list[str]:
    """The paths the start-up panel names on ``BASE``."""
    with up.console.capture() as captured:
        up._announce(settings, BASE, None, sample=sample)
    return re.findall(re.escape(BASE) + r"(/[^\s),]*)", captured.get())


@pytest.mark.parametrize("sample", [False, True])
async def test_every_page_the_start_up_panel_names_is_served(api: Api, settings: Settings, sample: bool):
    if sample:
        from services.ingest.pages import import_page, read_page, sample_pages

        for path in sample_pages():
            await import_page(api.log, read_page(path))
    paths = announced(settings, sample=sample)
    assert any(path.startswith("/claims") for path in paths)
    for path in paths:
        response = await api.http.get(path, params={"after": await api.log.head()})
        assert response.status_code == 200, (path, response.status_code)
