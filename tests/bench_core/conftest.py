"""Fixtures for bench_core tests: a loopback fake OpenAI-compatible server (see tests/fakes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.bench_core.fake_servers import started_servers
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """Start fake servers with ``fake_openai(policy, latency=..., slots=...)``; all stop at teardown."""
    yield from started_servers(FakeOpenAIServer)
