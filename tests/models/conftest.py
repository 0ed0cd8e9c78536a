"""Fixtures shared by the http: tests of this folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .test_http_service import Handler, Service


@pytest.fixture
def service() -> Iterator[Callable[..., Service]]:
    """``service(handler, **kw)`` starts a real :class:`Service` on 127.0.0.1; all stop after the test."""
    started: list[Service] = []

    def start(handler: Handler, **kw: Any) -> Service:
        s = Service(handler, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()
