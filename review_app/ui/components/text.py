"""User-supplied text (names, messages that quote them) shown literally in Markdown-rendering elements.

Streamlit renders Markdown, and some HTML-like syntax, in ``st.markdown``, ``st.caption``, alerts
(``st.error`` and friends), progress texts, widget labels and metric labels. A study called
``![x](https://host/pixel.png)`` would make every browser that shows it fetch that image, and a
display name with ``**`` or ``[link](...)`` would change the page. ``plain`` puts a backslash
(CommonMark's "show this character as is") before every character that can start Markdown, so
links, images, emphasis, HTML tags, entities, headings, lists, colour directives (``:red[...]``),
icon and emoji codes (``:material/...:``) and math (``$...$``) stay text. GitHub-style auto-links (``https://``,
``www.``, ``name@host``) are found in the text after escapes are resolved, so an invisible word
joiner (U+2060) goes before ``://``, after ``www`` and before ``@`` to keep them unlinked.
Use it for every interpolated value that a user, a file or a model supplied; ``st.text`` and
``st.dataframe`` need nothing.

``markdown_subset`` is for model output that is meant to be formatted (responses, reasoning traces):
it turns a safe subset of Markdown into HTML for ``st.html`` and leaves the rest as literal text.
"""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

_JOINER = "\u2060"
_AUTOLINKS = (
    (re.compile(r"(?<=\w)(?=://)"), _JOINER),  # scheme://
    (re.compile(r"(?i)(?<![\w.])www(?=\.)"), "www" + _JOINER),
    (re.compile(r"(?<=\S)(?=@)"), _JOINER),  # name@host
)
# Each pattern's first group is a character to escape.
_ESCAPE = (
    re.compile(r"([\\`*_\[\]<>$~|&])"),  # emphasis, code, links and images, HTML, math, tables, entities
    re.compile(r"^[ \t]*([#+=-])", re.MULTILINE),  # headings, lists, setext underlines
    re.compile(r"^[ \t]*\d+([.)])", re.MULTILINE),  # ordered lists
    re.compile(r"(:)(?=[A-Za-z])"),  # directives (:red[...], :small) and the start of :codes:
    re.compile(r"(:)(?=[\w+-]+:)"),  # the start of emoji codes (:smile:, :+1:)
    re.compile(r"(?=:[\w+-]+(:))"),  # and their end
    re.compile(r":material(/)"),  # Streamlit rewrites ":material/" before parsing
)


def plain(value: object) -> str:
    """``value`` as Markdown that renders as exactly its text (None -> empty).

    Only characters that could start Markdown are escaped, so ordinary sentences ("Saved. Thank
    you!") pass unchanged and stay easy to read in tests.
    """
    if value is None:
        return ""
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    for pattern, replacement in _AUTOLINKS:
        text = pattern.sub(replacement, text)
    marks = {match.start(1) for pattern in _ESCAPE for match in pattern.finditer(text)}
    return "".join("\\" + c if i in marks else c for i, c in enumerate(text))


# markdown-it's "zero" preset parses nothing but paragraphs and text; these rules are the only additions.
# Links, images, auto-links, reference definitions, raw HTML, entities and tables have no rule here, so they
# stay literal text, and html=False escapes every "<", ">", "&" and quote that reaches the output as text.
_SUBSET_RULES = (
    "heading",
    "lheading",
    "list",
    "blockquote",
    "hr",
    "code",
    "fence",
    "newline",
    "escape",
    "emphasis",
    "backticks",
)
_SUBSET_PARSER = MarkdownIt("zero", {"html": False, "linkify": False, "typographer": False, "breaks": True}).enable(
    list(_SUBSET_RULES)
)
_SUBSET_TAGS = frozenset(
    {"p", "br", "strong", "em", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "hr", "pre", "code"}
)
_TAG = re.compile(r"<[^>]*>")
_SUBSET_TAG = re.compile(r"<(/?)([a-z0-9]+)( start=\"\d+\")?>")  # the only attribute: an ordered list's start


def markdown_subset(value: object) -> str:
    """Model output written in Markdown, as HTML with only a safe subset formatted (None -> empty).

    Formatted: paragraphs, emphasis, headings, lists, block quotes, rules, code spans and code
    blocks. Everything else (links, images, auto-links, raw HTML, entities) shows as the literal
    text the model wrote, so the output can neither link away, load a remote resource nor run
    code. Line breaks inside a paragraph are kept (model output is written line by line), and a
    fenced block's language is dropped, so no attribute but an ordered list's start number is
    written. The result is checked against the subset's tags: anything else, which only a change
    in the parser could produce, returns the whole text escaped instead.
    """
    if value is None:
        return ""
    text = str(value)
    tokens = _SUBSET_PARSER.parse(text)
    for token in tokens:
        if token.type == "fence":
            token.info = ""
    rendered = _SUBSET_PARSER.renderer.render(tokens, _SUBSET_PARSER.options, {})
    for tag in _TAG.finditer(rendered):
        match = _SUBSET_TAG.fullmatch(tag.group())
        if match is None or match[2] not in _SUBSET_TAGS or (match[3] and (match[1] or match[2] != "ol")):
            return f'<p style="white-space:pre-wrap">{html.escape(text)}</p>'
    return rendered
