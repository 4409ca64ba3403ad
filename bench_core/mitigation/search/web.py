"""Online evidence: a web search API (Serper, Google results) and a page reader (Jina Reader).

These are the pair commonly used by open search-agent harnesses such as OpenSeeker, which the
MedMisBench search case study follows: ``search_web`` -> Serper, ``visit_web`` -> Jina Reader.
Endpoints and keys come from the environment, so the same command runs against the real services
or a proxy/mirror, and keys never appear in run manifests:

* Serper: ``POST {MEDREV_SERPER_URL or https://google.serper.dev/search}`` with header
  ``X-API-KEY: $SERPER_API_KEY`` and body ``{"q": query, "num": k}``; results are read from
  ``organic[]`` (``title``, ``link``, ``snippet``).
* Jina Reader: ``POST {MEDREV_JINA_READER_URL or https://r.jina.ai/}`` with body ``{"url": url}``,
  ``Accept: application/json`` and, when ``JINA_API_KEY`` is set, ``Authorization: Bearer`` (the
  reader also works keyless at a lower rate limit); the page is ``data.title`` / ``data.content``.

Rate limits and server errors (429, 5xx, timeouts, dropped connections) are retried a few times
with the runner's back-off rule (honouring Retry-After); anything left becomes a ``SearchError``
that the harness reports to the model and records.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench_core.kernel.providers.base import parse_retry_after, public_endpoint
from bench_core.kernel.runner import RetryPolicy
from bench_core.mitigation.search.base import Page, SearchError, SearchHit

SERPER_URL_ENV = "MEDREV_SERPER_URL"
SERPER_KEY_ENV = "SERPER_API_KEY"
SERPER_DEFAULT_URL = "https://google.serper.dev/search"
JINA_URL_ENV = "MEDREV_JINA_READER_URL"
JINA_KEY_ENV = "JINA_API_KEY"
JINA_DEFAULT_URL = "https://r.jina.ai/"
DEFAULT_RETRY = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=10.0, max_total=60.0)


class _HTTPService:
    """An httpx client with the retry rule shared by both services.

    Endpoint and key come from the arguments, else from the service's environment variables (``url_env``,
    ``key_env``), else the public endpoint; a service whose key is ``key_required`` refuses to start without one.
    """

    service = "http"
    url_env = ""
    default_url = ""
    key_env = ""
    key_required = False

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = url or os.environ.get(self.url_env) or self.default_url
        self.endpoint = public_endpoint(self.url)
        self.retry = retry
        self._api_key = _key(api_key, self.key_env, required=self.key_required, service=self.service)
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._rng = random.Random()

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            try:
                response = await self._client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException as exc:
                error = SearchError(f"{self.service} did not answer in time ({type(exc).__name__})", kind="timeout")
            except httpx.TransportError as exc:
                error = SearchError(f"{self.service} unreachable: {exc}", kind="connection")
            else:
                if response.status_code < 400:
                    return response
                error = SearchError(
                    f"{self.service} answered HTTP {response.status_code}: {_message(response)}",
                    kind=f"http_{response.status_code}",
                )
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if response.status_code not in (408, 409, 429) and response.status_code < 500:
                    raise error
            if attempt >= self.retry.max_attempts:
                raise error
            await asyncio.sleep(min(self.retry.delay(attempt, retry_after, self._rng), self.retry.max_delay))

    async def aclose(self) -> None:
        await self._client.aclose()


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(data, dict):
        for key in ("readableMessage", "message", "error", "detail"):
            if isinstance(data.get(key), str):
                return data[key][:300]
    return str(data)[:300]


def _key(api_key: str | None, env: str, *, required: bool, service: str) -> str | None:
    key = api_key or os.environ.get(env) or None
    if required and not key:
        raise ValueError(f"no {service} API key: set the environment variable {env}")
    return key


class SerperSearch(_HTTPService):
    """Google results through Serper (``search`` only)."""

    service = "Serper"
    url_env = SERPER_URL_ENV
    default_url = SERPER_DEFAULT_URL
    key_env = SERPER_KEY_ENV
    key_required = True

    async def search(self, query: str, k: int) -> list[SearchHit]:
        response = await self._post(
            {"q": query, "num": k}, {"X-API-KEY": self._api_key or "", "Content-Type": "application/json"}
        )
        try:
            data = response.json()
        except ValueError as exc:
            raise SearchError(f"Serper answered with a body that is not JSON: {exc}", kind="malformed") from exc
        organic = data.get("organic") if isinstance(data, dict) else None
        if not isinstance(organic, list):
            raise SearchError("Serper answered without an 'organic' result list", kind="malformed")
        hits = []
        for entry in organic:
            if isinstance(entry, dict) and isinstance(entry.get("link"), str):
                hits.append(SearchHit(entry["link"], str(entry.get("title") or ""), str(entry.get("snippet") or "")))
        return hits[:k]


class JinaReader(_HTTPService):
    """Page text through Jina Reader (``visit`` only)."""

    service = "Jina Reader"
    url_env = JINA_URL_ENV
    default_url = JINA_DEFAULT_URL
    key_env = JINA_KEY_ENV

    async def visit(self, url: str) -> Page:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SearchError(f"{url!r} is not an http(s) URL; use a URL returned by search_web", kind="bad_url")
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        response = await self._post({"url": url.strip()}, headers)
        try:
            data = response.json()
        except ValueError:
            return Page(url.strip(), "", response.text)  # the reader's plain-text/markdown answer
        page = data.get("data") if isinstance(data, dict) else None
        if not isinstance(page, dict) or not isinstance(page.get("content"), str):
            raise SearchError("Jina Reader answered without data.content", kind="malformed")
        return Page(str(page.get("url") or url.strip()), str(page.get("title") or ""), page["content"])


class WebSearch:
    """A ``SearchBackend``: Serper for ``search_web``, Jina Reader for ``visit_web``."""

    name = "web"

    def __init__(self, searcher: SerperSearch, reader: JinaReader) -> None:
        self.searcher = searcher
        self.reader = reader

    @classmethod
    def from_env(cls, *, timeout: float = 30.0) -> WebSearch:
        """Both services configured from the environment (see the module docstring)."""
        return cls(SerperSearch(timeout=timeout), JinaReader(timeout=timeout))

    def describe(self) -> dict[str, Any]:
        return {
            "backend": "web",
            "search": f"serper@{self.searcher.endpoint}",
            "reader": f"jina@{self.reader.endpoint}",
        }

    async def search(self, query: str, k: int) -> list[SearchHit]:
        return await self.searcher.search(query, k)

    async def visit(self, url: str) -> Page:
        return await self.reader.visit(url)

    async def aclose(self) -> None:
        await self.searcher.aclose()
        await self.reader.aclose()
