"""Loopback fake servers for fixtures: each test starts as many as it needs, and every one stops at its teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar


class Startable(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> None: ...


S = TypeVar("S", bound=Startable)


def started_servers(server_type: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """The body of a fixture that yields ``start(*args, **kwargs)``: a new running ``server_type`` server."""
    servers: list[S] = []

    def start(*args: Any, **kwargs: Any) -> S:
        server = server_type(*args, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
