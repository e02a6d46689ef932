"""Fixtures of the store tests: the in-process HTTP client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsymfind.stores.base import DEFAULT_LIMITS, Limits
from dsymfind.stores.http11 import Client
from dsymfind.stores.transfer import make_client


@pytest.fixture
def client_limits() -> Limits:
    """The client's limits; a module overrides this fixture with its own."""
    return DEFAULT_LIMITS


@pytest.fixture
def client(client_limits: Limits) -> Iterator[Client]:
    with make_client(client_limits) as made:
        yield made
