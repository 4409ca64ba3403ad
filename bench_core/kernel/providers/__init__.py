"""Model providers behind one ``ChatModel`` protocol; adapters for optional SDKs import lazily."""

from __future__ import annotations

from bench_core.kernel.providers.base import ChatModel, ChatRequest, ChatResponse, ProviderError, ToolCall
from bench_core.kernel.providers.batch import BatchAPI

PROVIDERS = ("openai", "anthropic", "google")

__all__ = [
    "PROVIDERS",
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "ProviderError",
    "ToolCall",
    "make_batch_api",
    "make_chat_model",
]


def make_chat_model(
    provider: str,
    name: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    connections: int = 64,
    max_tokens_param: str = "max_tokens",
) -> ChatModel:
    """A ``ChatModel`` for ``provider``; the API key is read from the environment variable named."""
    if provider == "openai":
        from bench_core.kernel.providers.openai_compat import OpenAICompatModel

        if not base_url:
            raise ValueError("the openai provider needs --base-url (e.g. https://api.openai.com/v1)")
        return OpenAICompatModel(
            name,
            base_url,
            api_key_env=api_key_env or "OPENAI_API_KEY",
            connections=connections,
            max_tokens_param=max_tokens_param,
        )
    if provider == "anthropic":
        from bench_core.kernel.providers.anthropic import AnthropicModel

        return AnthropicModel(name, base_url=base_url, api_key_env=api_key_env or "ANTHROPIC_API_KEY")
    if provider == "google":
        from bench_core.kernel.providers.google import GoogleModel

        return GoogleModel(name, base_url=base_url, api_key_env=api_key_env or "GEMINI_API_KEY")
    raise ValueError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")


def make_batch_api(model: ChatModel, *, timeout: float = 300.0) -> BatchAPI:
    """The batch adapter of ``model``'s provider, sharing its SDK client (and so its key and base URL)."""
    if model.provider == "openai":
        from bench_core.kernel.providers.openai_batch import OpenAIBatches

        return OpenAIBatches(model, timeout=timeout)  # type: ignore[arg-type]
    if model.provider == "anthropic":
        from bench_core.kernel.providers.anthropic_batch import AnthropicBatches

        return AnthropicBatches(model, timeout=timeout)  # type: ignore[arg-type]
    if model.provider == "google":
        from bench_core.kernel.providers.google_batch import GoogleBatches

        return GoogleBatches(model, timeout=timeout)  # type: ignore[arg-type]
    raise ValueError(f"provider {model.provider!r} has no batch API in medrev (openai, anthropic and google do)")
