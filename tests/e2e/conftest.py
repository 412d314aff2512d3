"""The e2e tests' browser fixture (tests/e2e/browsing.py makes the browser)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.e2e.browsing import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """JavaScript off: the pages must work without it."""
    driver = chromium(javascript=False)
    yield driver
    driver.quit()
