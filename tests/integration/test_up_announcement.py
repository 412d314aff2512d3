"""What ``claimlog up`` announces points at pages the registry serves, with the sample pages loaded or without."""

from __future__ import annotations

import re

import pytest

from services.orchestration import up
from services.orchestration.trust import Trust
from services.runtime.settings import Settings
from tests.integration.command_api import Api

BASE = "http://claimlog"  # the command API's test client answers there


def announced(settings: Settings, *, sample: bool) -> list[str]:
    """The paths the start-up panel names on ``BASE``."""
    with up.console.capture() as captured:
        up._announce(settings, BASE, None, sample=sample, trust=Trust(key_file=None, required_after=0, made=True))
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


@pytest.mark.parametrize("recorded", [None, 3])
def test_the_trust_warnings_are_written_before_the_panel_ends(settings: Settings, recorded: int | None):
    """Whoever waits for the panel's last line (an operator's supervisor, a test) has read the warnings too."""
    trust = Trust(key_file=None, required_after=None, made=False, recorded=recorded)
    with up.console.capture() as captured:
        up._announce(settings, BASE, None, sample=False, trust=trust)
    said = " ".join(captured.get().split())  # the lines as the console wrapped them
    end = said.index("Ctrl-C stops everything")
    assert -1 < said.find("warning: signatures are not required") < end and -1 < said.find("claimlog actors key require") < end
    if recorded is not None:
        assert -1 < said.find("key registry: recorded in the log its 3 keys") < end
