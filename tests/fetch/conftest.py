"""Fixtures of the fetch tests: the in-process HTTP client, never through a proxy."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from dsymfind.fetch.sources import DEFAULT_LIMITS, Limits
from dsymfind.fetch.transfer import make_client


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client honours proxy variables; 127.0.0.1 must never go through one."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("NO_PROXY", "*")


@pytest.fixture
def client_limits() -> Limits:
    """The client's limits; a module overrides this fixture with its own."""
    return DEFAULT_LIMITS


@pytest.fixture
def client(client_limits: Limits) -> Iterator[httpx.Client]:
    with make_client(client_limits) as made:
        yield made
