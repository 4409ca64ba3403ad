"""Plain text and a title from the document files a local evidence folder may hold.

Supported: ``.txt``, ``.md``/``.markdown``, ``.html``/``.htm`` (visible text, without scripts,
styles or navigation chrome) and ``.pdf`` (the text layer, through ``pypdf``; a scanned PDF without
one is reported, not indexed empty). Anything else in the folder is ignored. A file that cannot be
read raises ``DocumentError`` naming the file, and the index lists it as skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

TEXT_SUFFIXES = frozenset({".txt", ".text"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | MARKDOWN_SUFFIXES | HTML_SUFFIXES | PDF_SUFFIXES
MAX_TITLE = 200


class DocumentError(ValueError):
    """A document file that cannot be turned into text."""


@dataclass(frozen=True)
class Document:
    """A document's id (its path inside the folder, '/'-separated), title, text and kind."""

    doc_id: str
    title: str
    text: str
    kind: str


def read_document(path: Path, doc_id: str) -> Document:
    """The text of ``path`` by its suffix; ``DocumentError`` when unreadable or empty."""
    suffix = path.suffix.lower()
    try:
        if suffix in PDF_SUFFIXES:
            title, text, kind = *_pdf(path), "pdf"
        else:
            raw = path.read_bytes().decode("utf-8-sig")
            if suffix in HTML_SUFFIXES:
                title, text, kind = *_html(raw), "html"
            elif suffix in MARKDOWN_SUFFIXES:
                title, text, kind = _markdown_title(raw), raw, "markdown"
            elif suffix in TEXT_SUFFIXES:
                title, text, kind = _first_line(raw), raw, "text"
            else:
                raise DocumentError(f"{path}: unsupported file type {suffix!r}")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise DocumentError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    text = _tidy(text)
    if not text:
        hint = " (a scanned PDF without a text layer?)" if kind == "pdf" else ""
        raise DocumentError(f"{path}: no text{hint}")
    return Document(doc_id, (title or path.stem).strip()[:MAX_TITLE], text, kind)


def _tidy(text: str) -> str:
    lines = [re.sub(r"[ \t\f\v]+", " ", line).strip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip() if len(line.strip()) <= MAX_TITLE else ""
    return ""


def _markdown_title(text: str) -> str:
    for line in text.splitlines():
        match = re.match(r"^\s{0,3}#\s+(.+?)\s*#*\s*$", line)
        if match:
            return match.group(1)
    return _first_line(text)


class _HTMLText(HTMLParser):
    """Visible text with line breaks at block elements; the <title> (or first <h1>) kept apart."""

    SKIP = frozenset({"script", "style", "noscript", "template", "head", "nav", "svg"})
    BLOCK = frozenset(
        {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "section",
         "article", "header", "footer", "blockquote", "pre", "dd", "dt", "hr"}
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.h1 = ""
        self._skip = 0
        self._in_title = False
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in self.SKIP:
            self._skip += 1
        if tag == "h1":
            self._in_h1 = True
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in self.SKIP and self._skip:
            self._skip -= 1
        if tag == "h1":
            self._in_h1 = False
        if tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._skip:
            return
        if self._in_h1 and not self.title:
            self.h1 += data
        self.parts.append(data)


def _html(raw: str) -> tuple[str, str]:
    parser = _HTMLText()
    parser.feed(raw)
    parser.close()
    return (parser.title.strip() or parser.h1.strip()), "".join(parser.parts)


def _pdf(path: Path) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise DocumentError(f"{path}: encrypted PDF")
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages)
        title = (reader.metadata.title if reader.metadata else None) or ""
    except PdfReadError as exc:
        raise DocumentError(f"{path}: unreadable PDF ({exc})") from exc
    return (str(title).strip() or _first_line(text)), text
