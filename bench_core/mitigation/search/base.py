"""The evidence-gathering interface the tool harness talks to: search for sources, read one source.

A backend answers ``search(query, k)`` with ranked hits (URL, title, snippet) and ``visit(url)``
with the text of one source. The local backend's "URLs" are document ids inside a folder; the web
backend's are real URLs. Backends raise ``SearchError`` for anything the model should be told
about (no such document, HTTP 429 after retries, a bad URL): the harness turns it into a tool
result and records it, so one failed search never ends an item. ``describe()`` identifies the
evidence a run used (a corpus fingerprint, or the web endpoints) and goes into the result keys'
config hash, so results obtained on different evidence are never mixed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class SearchHit:
    """One search result as shown to the model."""

    url: str
    title: str
    snippet: str
    score: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Page:
    """The readable text of one source (not yet truncated: the harness applies the page budget)."""

    url: str
    title: str
    text: str


class SearchError(Exception):
    """A search or visit that did not work; ``kind`` classifies it for the trace and the report."""

    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


@runtime_checkable
class SearchBackend(Protocol):
    """Where ``search_web`` and ``visit_web`` get their answers."""

    name: str

    def describe(self) -> dict[str, Any]:
        """What identifies the evidence (recorded with results and hashed into their key)."""
        ...

    async def search(self, query: str, k: int) -> list[SearchHit]: ...

    async def visit(self, url: str) -> Page: ...

    async def aclose(self) -> None: ...
