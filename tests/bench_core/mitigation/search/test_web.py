"""Serper search and Jina Reader adapters against loopback fakes (never the internet)."""

from __future__ import annotations

import asyncio

import pytest

from bench_core.kernel.runner import RetryPolicy
from bench_core.mitigation.search import SearchError, make_backend
from bench_core.mitigation.search.web import JinaReader, SerperSearch, WebSearch
from tests.fakes.search_server import FakeSearchServer, Fault

FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, max_total=5)
PAGES = {
    "https://guidelines.example.org/anaphylaxis": {
        "title": "Anaphylaxis guideline",
        "content": "Give intramuscular adrenaline 0.5 mg into the anterolateral thigh.",
    }
}


def results(query: str, num: int) -> list[dict[str, str]]:
    return [
        {"title": f"Result {i} for {query}", "link": f"https://site{i}.example.org/page", "snippet": f"snippet {i}"}
        for i in range(1, 8)
    ]


def backend(server: FakeSearchServer, *, timeout: float = 5.0, key: str = "serper-test-key") -> WebSearch:
    return WebSearch(
        SerperSearch(url=server.search_url, api_key=key, timeout=timeout, retry=FAST),
        JinaReader(url=server.reader_url, api_key="jina-test-key", timeout=timeout, retry=FAST),
    )


async def _use(web: WebSearch, call):
    try:
        return await call(web)
    finally:
        await web.aclose()


def test_search_sends_the_serper_request_and_reads_organic_results():
    with FakeSearchServer(results=results) as server:
        hits = asyncio.run(_use(backend(server), lambda w: w.search("anaphylaxis adrenaline dose", 3)))
        seen = server.requests[0]
    assert [h.url for h in hits] == [f"https://site{i}.example.org/page" for i in (1, 2, 3)]
    assert hits[0].title == "Result 1 for anaphylaxis adrenaline dose" and hits[0].snippet == "snippet 1"
    assert seen.path == "/search" and seen.body == {"q": "anaphylaxis adrenaline dose", "num": 3}
    assert seen.headers["x-api-key"] == "serper-test-key" and seen.headers["content-type"] == "application/json"


def test_reader_posts_the_url_and_returns_the_page():
    with FakeSearchServer(pages=PAGES) as server:
        page = asyncio.run(_use(backend(server), lambda w: w.visit("https://guidelines.example.org/anaphylaxis")))
        seen = server.requests[0]
    assert page.title == "Anaphylaxis guideline" and "anterolateral thigh" in page.text
    assert seen.path == "/reader" and seen.body == {"url": "https://guidelines.example.org/anaphylaxis"}
    assert seen.headers["authorization"] == "Bearer jina-test-key" and seen.headers["accept"] == "application/json"


def test_rate_limits_and_server_errors_are_retried_then_reported():
    faults = {"/search": [Fault(429, {"Retry-After": "0"}), Fault(503)]}
    with FakeSearchServer(results=results, faults=faults) as server:
        hits = asyncio.run(_use(backend(server), lambda w: w.search("q", 2)))
        assert len(hits) == 2 and server.count("/search") == 3
    faults = {"/search": [Fault(500)] * 5}
    with FakeSearchServer(results=results, faults=faults) as server:
        with pytest.raises(SearchError, match="Serper answered HTTP 500") as error:
            asyncio.run(_use(backend(server), lambda w: w.search("q", 2)))
        assert error.value.kind == "http_500" and server.count("/search") == 3


def test_client_errors_are_not_retried():
    with FakeSearchServer(results=results) as server:
        with pytest.raises(SearchError, match="HTTP 403: Unauthorized") as error:
            asyncio.run(_use(backend(server, key="wrong"), lambda w: w.search("q", 2)))
        assert error.value.kind == "http_403" and server.count("/search") == 1
        with pytest.raises(SearchError, match=r"cannot read https://nowhere\.example\.org") as error:
            asyncio.run(_use(backend(server), lambda w: w.visit("https://nowhere.example.org")))
        assert error.value.kind == "http_422" and server.count("/reader") == 1


def test_a_hanging_service_times_out():
    faults = {"/search": [Fault(hang=3.0)] * 3}
    with (
        FakeSearchServer(results=results, faults=faults) as server,
        pytest.raises(SearchError, match="did not answer in time") as error,
    ):
        asyncio.run(_use(backend(server, timeout=0.2), lambda w: w.search("q", 2)))
    assert error.value.kind == "timeout"


def test_bad_urls_and_bodies():
    with FakeSearchServer(results=results) as server:
        with pytest.raises(SearchError, match="not an http\\(s\\) URL") as error:
            asyncio.run(_use(backend(server), lambda w: w.visit("cardiology/hypertension.md")))
        assert error.value.kind == "bad_url" and server.count("/reader") == 0
    faults = {"/search": [Fault(200, body='{"credits": 1}')]}
    with (
        FakeSearchServer(results=results, faults=faults) as server,
        pytest.raises(SearchError, match="without an 'organic' result list"),
    ):
        asyncio.run(_use(backend(server), lambda w: w.search("q", 2)))


def test_configuration_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    with pytest.raises(ValueError, match="set the environment variable SERPER_API_KEY"):
        make_backend("web")
    with FakeSearchServer(results=results, pages=PAGES) as server:
        monkeypatch.setenv("SERPER_API_KEY", "serper-test-key")
        monkeypatch.setenv("MEDREV_SERPER_URL", server.search_url)
        monkeypatch.setenv("MEDREV_JINA_READER_URL", server.reader_url)
        monkeypatch.delenv("JINA_API_KEY", raising=False)
        web = make_backend("web")
        assert web.describe() == {
            "backend": "web",
            "search": f"serper@{server.search_url}",
            "reader": f"jina@{server.reader_url.rstrip('/')}",
        }
        page = asyncio.run(_use(web, lambda w: w.visit("https://guidelines.example.org/anaphylaxis")))
        assert page.title == "Anaphylaxis guideline"
        assert "authorization" not in server.requests[-1].headers  # keyless reader use
