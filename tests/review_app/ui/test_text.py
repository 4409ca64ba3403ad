"""``plain``: user-supplied text renders as exactly itself in Markdown (CommonMark via markdown-it-py here;
Streamlit's own extensions and GitHub auto-links are checked in a real browser in test_browser_safety.py)."""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from review_app.ui.components.text import plain

HOSTILE = [
    "![x](http://203.0.113.9/pixel.png)",
    "**Dr** _House_ [profile](http://203.0.113.9/) `code` ~~gone~~",
    "<img src='http://203.0.113.9/q.png'> <script>alert(1)</script> &amp; &#60;",
    "# Heading\n- item\n+ item\n1. first\n2) second\n> quote\n---\nsetext\n===",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "[ref]: http://203.0.113.9/\n[ref] and [/] and [bold]x[/bold]",
    "$E=mc^2$ and \\escaped\\ and <https://203.0.113.9/>",
    ":red[colour] :material/home: :smile: :+1: 12:30",
]
ORDINARY = [
    "Submitted. Thank you!",
    "Your last change could not be saved: try again (a reload helps).",
    "Dr O'Neil, MD",
]
TAG = re.compile(r"<(?!/?p>|br />)[^>]*>")


def _rendered_text(markdown: str) -> str:
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    out = md.render(markdown)
    assert not TAG.search(out), out  # only paragraphs and line breaks: no link, image, emphasis, code, heading
    return html.unescape(re.sub(r"</?p>|<br />", "", out)).strip("\n").replace("\u2060", "")


@pytest.mark.parametrize("text", HOSTILE + ORDINARY)
def test_plain_renders_as_exactly_the_text(text):
    assert _rendered_text(plain(text)) == text


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_sentences_pass_unchanged(text):
    assert plain(text) == text


def test_none_is_empty_and_values_are_stringified():
    assert plain(None) == ""
    assert plain(ValueError("no study named 'x*'")) == "no study named 'x\\*'"
