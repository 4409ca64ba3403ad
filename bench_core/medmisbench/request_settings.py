"""Request profiles and the decoding settings a MedMisBench run's requests carry.

A request profile names how an endpoint is spoken to (OpenAI, OpenAI reasoning models, other
OpenAI-compatible servers, Anthropic, Google), as the authors' notebook tells its providers apart.
``RequestSettings`` is what ``bench_core.medmisbench.prompts.resolve_request`` makes of a
template's request entry for one profile and model: what the run records, hashes and sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

PROFILES = ("openai", "openai-reasoning", "openai-compatible", "anthropic", "google")
GEMINI_HARM_CATEGORIES = (
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    "HARM_CATEGORY_DANGEROUS_CONTENT",
)
THINKING_SWITCHES = ("auto", "on", "off")


@dataclass(frozen=True)
class RequestSettings:
    """The decoding settings of a run's requests, resolved for its template, profile and model.

    ``temperature``, ``max_tokens`` and ``reasoning_effort`` are what the run records (the effective
    values); ``send_reasoning_effort`` is False when the effort travels in ``extra`` instead (Claude's
    ``output_config``, Gemini's ``thinking_config``). ``extra`` is merged into the provider's request
    as ``ChatRequest.extra``.
    """

    profile: str | None
    temperature: float | None
    max_tokens: int | None
    reasoning_effort: str | None
    max_tokens_param: str | None = None
    response_format: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    send_reasoning_effort: bool = True

    def hashed(self) -> dict[str, Any]:
        """The settings beyond temperature, token cap and effort, for the config hash (only those set)."""
        out: dict[str, Any] = {}
        if self.profile is not None:
            out["profile"] = self.profile
        if self.max_tokens_param is not None:
            out["max_tokens_param"] = self.max_tokens_param
        if self.response_format is not None:
            out["response_format"] = self.response_format
        if self.extra:
            out["extra"] = self.extra
        return out

    def describe(self) -> dict[str, Any]:
        """Everything sent besides the messages, for manifests and reports."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "reasoning_effort": self.reasoning_effort,
            **self.hashed(),
        }


def request_profile(provider: str, base_url: str | None, model: str) -> str:
    """The request profile of an endpoint, as the authors' notebook tells its providers apart.

    ``anthropic`` and ``google`` by provider; for the OpenAI provider, ``api.openai.com`` is
    ``openai`` or, for model ids starting gpt-5, o1, o3, o4 or o5, ``openai-reasoning``; any other
    server (SGLang, vLLM, Ollama ...) is ``openai-compatible``.
    """
    if provider in ("anthropic", "google"):
        return provider
    host = (urlsplit(base_url or "").hostname or "").lower()
    if host == "api.openai.com":
        return "openai-reasoning" if model.startswith(("gpt-5", "o1", "o3", "o4", "o5")) else "openai"
    return "openai-compatible"


def check_profile(provider: str, profile: str) -> None:
    """Refuse a request profile that the provider's adapter cannot send (e.g. ``google`` settings to OpenAI)."""
    allowed = {"anthropic": ("anthropic",), "google": ("google",)}.get(
        provider, ("openai", "openai-reasoning", "openai-compatible")
    )
    if profile not in allowed:
        raise ValueError(
            f"--request-profile {profile} does not fit --provider {provider}; use one of {', '.join(allowed)} (or auto)"
        )
