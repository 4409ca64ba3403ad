"""Fixtures of the batch tests: a loopback fake of the three batch APIs (``tests/fakes/batch_server.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.bench_core.fake_servers import started_servers
from tests.fakes.batch_server import FakeBatchServer


@pytest.fixture
def fake_batch() -> Iterator[Callable[..., FakeBatchServer]]:
    """Start fake batch servers with ``fake_batch(policy, steps=..., expire=..., limits=...)``; all stop at teardown."""
    yield from started_servers(FakeBatchServer)


@pytest.fixture(autouse=True)
def _test_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API key the Anthropic and Google SDKs insist on (the fake ignores it); never a real one."""
    monkeypatch.setenv("MEDREV_TEST_KEY", "test-key")
