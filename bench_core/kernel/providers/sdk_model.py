"""What the ``ChatModel`` adapters on an official SDK (Anthropic, Google) share: how they get their client.

The SDK is imported first, so a missing optional extra is reported as such whatever the key; the key
is the one given, else the one in the environment variable named (the provider's own by default);
the client is made once and shared with the provider's batch adapter, so both use one key and one
base URL. A client passed in (a test's fake, a configured SDK client) is used as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from bench_core.kernel.providers.base import public_endpoint, resolve_api_key


@dataclass(frozen=True)
class SDKClient:
    """How one provider's SDK client is made: the SDK module, the key it needs, and its ``connect`` call.

    ``connect(sdk, key, base_url)`` returns the SDK's async-capable client for ``key`` at ``base_url``
    (None: the SDK's default endpoint); every adapter gives its own, so none is left to a base class.
    """

    vendor: str  # as named in the "no API key" message
    module: str  # the SDK module imported when no client is given
    default_base_url: str
    key_env: str  # the environment variable read when none is named
    connect: Callable[[ModuleType, str, str | None], Any]

    def make(self, base_url: str | None, api_key_env: str | None, api_key: str | None) -> Any:
        """A new client; ``ImportError`` without the SDK, ``ValueError`` without a key."""
        sdk = importlib.import_module(self.module)
        env = api_key_env or self.key_env
        key = resolve_api_key(api_key, env)
        if not key:
            raise ValueError(f"no {self.vendor} API key: set the environment variable {env}")
        return self.connect(sdk, key, base_url)


class SDKChatModel:
    """The constructor and client of a ``ChatModel`` whose calls go through a provider's SDK (``sdk_client``)."""

    provider: ClassVar[str]
    sdk_client: ClassVar[SDKClient]

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        api_key: str | None = None,
        client: Any = None,
    ) -> None:
        self.name = name
        self.endpoint = public_endpoint(base_url or self.sdk_client.default_base_url)
        self._client = client if client is not None else self.sdk_client.make(base_url, api_key_env, api_key)

    @property
    def client(self) -> Any:
        """The SDK client (the batch adapter of the same provider shares it, with its key and base URL)."""
        return self._client
