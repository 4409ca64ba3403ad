"""``markdown_subset``: model output shows its emphasis, headings, lists and code formatted, and every link,
image, auto-link, raw HTML tag and entity as the literal text the model wrote.

The browser side (nothing loads or links away, the formatting shows) is test_browser_review_feedback.py.
"""

from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from review_app.ui.components import text
from review_app.ui.components.text import markdown_subset

ALLOWED = {"p", "br", "strong", "em", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "hr"}
ALLOWED |= {"pre", "code"}
TAG = re.compile(r"<(/?)([^\s>/]+)([^>]*)>")

# Each: (hostile Markdown, the literal text it must show).
HOSTILE = [
    ("[click](javascript:alert(1))", "[click](javascript:alert(1))"),
    ("[x](http://203.0.113.9/ 'title')", "[x](http://203.0.113.9/ 'title')"),
    ("![pixel](http://203.0.113.9/p.png)", "![pixel](http://203.0.113.9/p.png)"),
    ("<img src=x onerror=alert(1)>", "<img src=x onerror=alert(1)>"),
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),
    ("<div>\n<script>alert(1)</script>\n</div>", "<div>\n<script>alert(1)</script>\n</div>"),
    ("<https://203.0.113.9/> and <mailto:a@b.example>", "<https://203.0.113.9/> and <mailto:a@b.example>"),
    ("see https://203.0.113.9/x and www.example.com", "see https://203.0.113.9/x and www.example.com"),
    ("&amp; &#60;script&#62; &lt;b&gt; &copy;", "&amp; &#60;script&#62; &lt;b&gt; &copy;"),
    ("[ref]: http://203.0.113.9/\n\n[ref] and [ref][]", "[ref]: http://203.0.113.9/\n[ref] and [ref][]"),
    ('**<a href="javascript:alert(1)">x</a>**', '<a href="javascript:alert(1)">x</a>'),
    ("`<img src=x onerror=alert(1)>`", "<img src=x onerror=alert(1)>"),
    ("```html onload=alert(1)\n<svg onload=alert(1)>\n```", "<svg onload=alert(1)>"),
    ("| a | b |\n|---|---|\n| 1 | 2 |", "| a | b |\n|---|---|\n| 1 | 2 |"),
    ('<a href="x">**bold**</a>', '<a href="x">bold</a>'),
]


def visible(rendered: str) -> str:
    """The text a browser shows for the rendered HTML (tags dropped, entities resolved, breaks as newlines)."""
    return html.unescape(TAG.sub("", rendered.replace("<br>\n", "\n"))).strip("\n")


def tags(rendered: str) -> list[tuple[str, str]]:
    return [(m[2], m[3]) for m in TAG.finditer(rendered)]


@pytest.mark.parametrize(("source", "literal"), HOSTILE)
def test_links_images_html_and_entities_stay_literal_text(source, literal):
    rendered = markdown_subset(source)
    for name, attributes in tags(rendered):
        assert name in ALLOWED, rendered
        assert attributes == "", rendered  # no href, src, on*, style or class can reach the page
    assert literal in visible(rendered)
    assert not re.search(r"<(a|img|script|svg|div|iframe)\b", rendered)


def test_the_subset_is_formatted():
    source = (
        "# Answer\n**E. Emergency angiography** is *correct*; __also__ _this_.\n\n"
        "## Why\n- first\n- second with `code`\n\n3. third\n4. fourth\n\n"
        "> quoted\n\n---\n\n```python\nprint('<b>')\n```\n\n    indented code"
    )
    rendered = markdown_subset(source)
    assert "<h1>Answer</h1>" in rendered and "<h2>Why</h2>" in rendered
    assert "<strong>E. Emergency angiography</strong>" in rendered and "<em>correct</em>" in rendered
    assert "<strong>also</strong>" in rendered and "<em>this</em>" in rendered
    assert "<ul>\n<li>first</li>\n<li>second with <code>code</code></li>\n</ul>" in rendered
    assert '<ol start="3">\n<li>third</li>\n<li>fourth</li>\n</ol>' in rendered
    assert "<blockquote>\n<p>quoted</p>\n</blockquote>" in rendered and "<hr>" in rendered
    assert "<pre><code>print('&lt;b&gt;')\n</code></pre>" in rendered  # the language is dropped
    assert "<pre><code>indented code\n</code></pre>" in rendered


def test_line_breaks_inside_a_paragraph_are_kept():
    assert markdown_subset("line one\nline two") == "<p>line one<br>\nline two</p>\n"


def test_plain_text_and_none():
    assert markdown_subset("Dr O'Neil said 5 > 3 & 2 < 4.") == "<p>Dr O'Neil said 5 &gt; 3 &amp; 2 &lt; 4.</p>\n"
    assert markdown_subset(None) == ""
    assert markdown_subset("") == ""


def test_the_output_matches_a_commonmark_parser_with_links_and_html_off():
    """The subset is CommonMark's own parsing of what it formats, not a hand-made approximation."""
    reference = MarkdownIt("commonmark", {"html": False, "breaks": True, "xhtmlOut": False}).disable(
        ["link", "image", "autolink", "html_inline", "html_block", "entity", "reference", "table", "strikethrough"],
        ignoreInvalid=True,
    )
    for source in ("**a** _b_ `c`", "# h\n\n- x\n- y\n\n1. z", "> q\n\n***\n\ntext\n===\n\nx  \ny"):
        assert markdown_subset(source) == reference.render(source)


def test_anything_outside_the_subset_falls_back_to_escaped_text(monkeypatch):
    """Should the parser ever write another tag (here: links turned on), the text is shown escaped instead."""
    loose = MarkdownIt("zero", {"html": False}).enable([*text._SUBSET_RULES, "link", "image"])
    monkeypatch.setattr(text, "_SUBSET_PARSER", loose)
    source = "**bold** [click](http://203.0.113.9/) ![i](http://203.0.113.9/i.png) <b>"
    rendered = markdown_subset(source)
    assert "<a" not in rendered and "<img" not in rendered and "<strong>" not in rendered
    assert rendered == f'<p style="white-space:pre-wrap">{html.escape(source)}</p>'
