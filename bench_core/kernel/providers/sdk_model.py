"""What the ``ChatModel`` adapters on an official SDK (Anthropic, Google) share: how they get their client.

The SDK is imported first, so a missing optional extra is reported as such whatever the key; the key
is the one given, else the one in the environment variable named (the provider's own by default);
the client is made once and shared with the provider's batch adapter, so both use one key and one
base URL. A client passed in (a test's fake, a configured SDK client) is used as it is.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, ClassVar

from bench_core.kernel.providers.base import public_endpoint, resolve_api_key


class SDKChatModel:
    """The constructor and client of a ``ChatModel`` whose calls go through a provider's SDK."""

    provider: ClassVar[str]
    vendor: ClassVar[str]  # as named in the "no API key" message
    sdk: ClassVar[str]  # the module imported when no client is given
    default_base_url: ClassVar[str]
    key_env: ClassVar[str]  # the environment variable read when none is named

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
        self.endpoint = public_endpoint(base_url or self.default_base_url)
        if client is None:
            sdk = importlib.import_module(self.sdk)
            env = api_key_env or self.key_env
            key = resolve_api_key(api_key, env)
            if not key:
                raise ValueError(f"no {self.vendor} API key: set the environment variable {env}")
            client = self.connect(sdk, key, base_url)
        self._client = client

    @property
    def client(self) -> Any:
        """The SDK client (the batch adapter of the same provider shares it, with its key and base URL)."""
        return self._client

    def connect(self, sdk: ModuleType, key: str, base_url: str | None) -> Any:
        """The SDK's async-capable client for ``key`` at ``base_url`` (None: the SDK's default endpoint)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to make its {self.sdk} client")
