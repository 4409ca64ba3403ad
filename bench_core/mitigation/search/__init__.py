"""Search backends for the tool-using harness: one interface, a local BM25 index and web search.

``make_backend("local:DIR")`` indexes a folder of documents (SQLite FTS5, BM25);
``make_backend("web")`` uses Serper for search and Jina Reader for pages, configured from the
environment (see ``bench_core.mitigation.search.web``).
"""

from __future__ import annotations

from pathlib import Path

from bench_core.mitigation.search.base import Page, SearchBackend, SearchError, SearchHit

__all__ = ["Page", "SearchBackend", "SearchError", "SearchHit", "make_backend"]


def make_backend(spec: str, *, index_path: str | Path | None = None, timeout: float = 30.0) -> SearchBackend:
    """The backend named by ``spec``: ``local:DIR`` or ``web``.

    ``index_path`` keeps the local index on disk (reused while the folder is unchanged).
    """
    kind, _, argument = spec.partition(":")
    if kind == "local":
        if not argument:
            raise ValueError("--tools local needs a folder: local:DIR")
        from bench_core.mitigation.search.local import LocalSearch

        return LocalSearch.build(argument, index_path=index_path)
    if kind == "web" and not argument:
        from bench_core.mitigation.search.web import WebSearch

        return WebSearch.from_env(timeout=timeout)
    raise ValueError(f"unknown search backend {spec!r}; expected local:DIR or web")
