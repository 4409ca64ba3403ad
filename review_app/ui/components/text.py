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
"""

from __future__ import annotations

import re

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
