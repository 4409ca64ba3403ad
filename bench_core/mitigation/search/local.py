"""Offline evidence: a folder of documents ranked with SQLite FTS5's built-in BM25.

Why SQLite FTS5: it ships with Python's ``sqlite3`` (no new dependency, no native wheel to build),
ranks with BM25 (``bm25()``, the ranking the mitigation case study's search engines approximate,
maintained as part of SQLite rather than written here), produces query-dependent snippets
(``snippet()``), stems English (``porter`` over ``unicode61`` with diacritics folded) and, with its
``trigram`` tokenizer, matches Chinese text, which has no spaces between words. The index is one
SQLite file, so a large corpus is indexed once and reused while its fingerprint is unchanged.

Queries are the model's free text: they are reduced to terms (words; character trigrams for
Chinese), each quoted so FTS5 syntax in a query can never break it, and OR-ed, so BM25 ranks by how
many and how rare the matching terms are. The title counts twice as much as the body.

The "URL" of a document is its id: its path inside the folder with '/' separators (e.g.
``cardiology/hypertension.md``); ``visit`` takes exactly that id.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_core.kernel.text import CJK, CJK_RUN
from bench_core.mitigation.search.base import Page, SearchError, SearchHit
from bench_core.mitigation.search.documents import SUPPORTED_SUFFIXES, Document, DocumentError, read_document

INDEX_VERSION = "fts5-bm25@1"  # bump when extraction, tokenizers or weights change: old index files are rebuilt
TITLE_WEIGHT = 2.0
BODY_WEIGHT = 1.0
SNIPPET_TOKENS = 32
_WORD = re.compile(r"[^\W_]+")

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents(rowid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
                       text TEXT NOT NULL, kind TEXT NOT NULL);
CREATE VIRTUAL TABLE words USING fts5(title, text, content='documents', content_rowid='rowid',
                                      tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE grams USING fts5(title, text, content='documents', content_rowid='rowid', tokenize='trigram');
"""


def _check_fts5() -> None:
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
    except sqlite3.OperationalError as exc:  # pragma: no cover - depends on how Python was built
        raise RuntimeError(
            f"this Python's SQLite {sqlite3.sqlite_version} lacks FTS5 with the trigram tokenizer (needs 3.34+): {exc}"
        ) from exc


@dataclass
class CorpusFiles:
    """The document files of a folder, their fingerprint, and files that are not documents."""

    folder: Path
    files: list[tuple[str, Path]]
    fingerprint: str
    ignored: list[str] = field(default_factory=list)


def scan_folder(folder: str | Path) -> CorpusFiles:
    """Every supported file under ``folder`` (hidden files and folders excluded), with a content fingerprint.

    The fingerprint hashes each document id with the SHA-256 of its bytes and the index version, so
    it changes when any document is added, removed, renamed or edited.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder of documents")
    files: list[tuple[str, Path]] = []
    ignored: list[str] = []
    digest = hashlib.sha256(INDEX_VERSION.encode())
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        doc_id = relative.as_posix()
        if path.suffix.lower() not in SUPPORTED_SUFFIXES:
            ignored.append(doc_id)
            continue
        files.append((doc_id, path))
        digest.update(doc_id.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return CorpusFiles(folder, files, digest.hexdigest(), ignored)


class LocalSearch:
    """A ``SearchBackend`` over an indexed folder. Build with ``LocalSearch.build(folder)``."""

    name = "local"

    def __init__(self, connection: sqlite3.Connection, folder: Path, fingerprint: str) -> None:
        self._db = connection
        self.folder = folder
        self.fingerprint = fingerprint
        self.skipped: list[dict[str, str]] = json.loads(self._meta("skipped") or "[]")

    @classmethod
    def build(cls, folder: str | Path, *, index_path: str | Path | None = None) -> LocalSearch:
        """Index ``folder`` (in memory, or in ``index_path``, which is reused while the fingerprint matches).

        Files that cannot be read are skipped and listed in ``skipped`` with the reason; a folder
        with no readable document is refused.
        """
        _check_fts5()
        corpus = scan_folder(folder)
        if index_path is not None:
            index_path = Path(index_path)
            if index_path.exists():
                existing = sqlite3.connect(index_path, check_same_thread=False)
                try:
                    row = existing.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
                except sqlite3.DatabaseError:
                    row = None
                if row is not None and row[0] == corpus.fingerprint:
                    return cls(existing, corpus.folder, corpus.fingerprint)
                existing.close()
            index_path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=index_path.parent, prefix=".index-", suffix=".sqlite")
            os.close(handle)
            try:
                connection = sqlite3.connect(temporary)
                _fill(connection, corpus)
                connection.close()
                os.replace(temporary, index_path)  # a reader never sees a half-built index
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
            return cls(sqlite3.connect(index_path, check_same_thread=False), corpus.folder, corpus.fingerprint)
        connection = sqlite3.connect(":memory:", check_same_thread=False)
        _fill(connection, corpus)
        return cls(connection, corpus.folder, corpus.fingerprint)

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    @property
    def n_documents(self) -> int:
        return self._db.execute("SELECT count(*) FROM documents").fetchone()[0]

    def describe(self) -> dict[str, Any]:
        return {"backend": "local", "fingerprint": self.fingerprint, "documents": self.n_documents}

    def search_sync(self, query: str, k: int) -> list[SearchHit]:
        """The ``k`` best documents for ``query`` by BM25 (best first); [] when nothing matches."""
        table, expression = _match_expression(query)
        if expression is None:
            return []
        rows = self._db.execute(
            f"SELECT d.doc_id, d.title, snippet({table}, 1, '', '', ' … ', {SNIPPET_TOKENS}),"
            f" bm25({table}, {TITLE_WEIGHT}, {BODY_WEIGHT}) AS rank"
            f" FROM {table} JOIN documents d ON d.rowid = {table}.rowid"
            f" WHERE {table} MATCH ? ORDER BY rank, d.doc_id LIMIT ?",
            (expression, k),
        ).fetchall()
        return [
            SearchHit(doc_id, title, " ".join(snippet.split()), round(-rank, 4))
            for doc_id, title, snippet, rank in rows
        ]

    def visit_sync(self, url: str) -> Page:
        doc_id = url.strip().removeprefix("./")
        row = self._db.execute("SELECT doc_id, title, text FROM documents WHERE doc_id = ?", (doc_id,)).fetchone()
        if row is None:
            raise SearchError(f"no document with id {url!r}; use an id returned by search_web", kind="not_found")
        return Page(*row)

    # SQLite answers in microseconds to milliseconds, so the async methods call it directly.
    async def search(self, query: str, k: int) -> list[SearchHit]:
        return self.search_sync(query, k)

    async def visit(self, url: str) -> Page:
        return self.visit_sync(url)

    async def aclose(self) -> None:
        self._db.close()


def _documents(corpus: CorpusFiles, skipped: list[dict[str, str]]) -> Iterator[Document]:
    for doc_id, path in corpus.files:
        try:
            yield read_document(path, doc_id)
        except DocumentError as exc:
            skipped.append({"doc_id": doc_id, "reason": str(exc)})


def _fill(connection: sqlite3.Connection, corpus: CorpusFiles) -> None:
    skipped: list[dict[str, str]] = []
    with connection:
        connection.executescript(_SCHEMA)
        connection.executemany(
            "INSERT INTO documents(doc_id, title, text, kind) VALUES (?, ?, ?, ?)",
            ((d.doc_id, d.title, d.text, d.kind) for d in _documents(corpus, skipped)),
        )
        count = connection.execute("SELECT count(*) FROM documents").fetchone()[0]
        if count == 0:
            reasons = "; ".join(s["reason"] for s in skipped[:3])
            raise DocumentError(
                f"{corpus.folder}: no readable document to index" + (f" ({reasons})" if reasons else "")
            )
        for table in ("words", "grams"):
            connection.execute(f"INSERT INTO {table}(rowid, title, text) SELECT rowid, title, text FROM documents")
        connection.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [
                ("fingerprint", corpus.fingerprint),
                ("version", INDEX_VERSION),
                ("skipped", json.dumps(skipped)),
                ("ignored", json.dumps(corpus.ignored)),
            ],
        )


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match_expression(query: str) -> tuple[str, str | None]:
    """(FTS5 table, MATCH expression) for a free-text query; the expression is None when it has no term.

    Chinese queries go to the trigram table as overlapping character trigrams, plus any Latin word
    of three letters or more (a Chinese run shorter than three characters cannot be matched by
    trigrams and is dropped); other queries go to the stemmed word table.
    """
    if CJK.search(query):
        terms: list[str] = []
        for run in CJK_RUN.findall(query):
            terms += [run[i : i + 3] for i in range(max(1, len(run) - 2))] if len(run) >= 3 else []
        terms += [w for w in _WORD.findall(query) if len(w) >= 3 and not CJK.search(w)]
        table = "grams"
    else:
        terms = [w.lower() for w in _WORD.findall(query)]
        table = "words"
    unique = list(dict.fromkeys(terms))
    return table, (" OR ".join(_quote(t) for t in unique) if unique else None)
