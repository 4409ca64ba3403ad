"""WCAG 2.1 AA on every page: the app's navigation, colours, focus rings and browser-side repairs.

Audited with axe-core in Chromium (tests/review_app/ui/test_accessibility.py). Where Streamlit's own
markup falls short, the app works around it here rather than in each page:

- Navigation: Streamlit's sidebar navigation puts its section headers (``div``) inside the ``ul``
  of links and its ``li`` items outside any list when sections are used (axe ``list``/``listitem``).
  The app hides it (``st.navigation(position="hidden")``) and draws its own: a heading per section
  and one ``st.page_link`` per page inside a container that the page script marks as a navigation
  landmark, the current page as ``aria-current="page"``.
- Colour: captions (Streamlit's faded text, 3.9:1 on white), inline code (3.0:1) and the key hint
  on a primary button (3.2:1) are drawn darker, at 4.5:1 or more.
- Focus: every focused control gets a 3 px outline (Streamlit draws none on links, the main region
  and radio buttons); a radio or switch, whose input is hidden, shows it on its label.
- In the browser (``a11y.js``): scrolling regions become named tab stops, charts images named by
  their numbers (``charts.alt_text``), the focus is moved where the eye goes (into a popover and
  back, to a control a rerun redrew, to the sign-in form and the queue's next task when they open),
  and one live region speaks what the score panel reports.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import streamlit as st

SCRIPT = (Path(__file__).with_name("a11y.js")).read_text(encoding="utf-8")
FOCUS = "#1a47b8"  # 8.0:1 on white, 7.1:1 on the sidebar's grey
STYLE = f"""<style>
[data-testid='stCaptionContainer'] {{color:#585b66 !important;opacity:1 !important;}}
[data-testid='stMarkdownContainer'] code {{color:#17604c;}}
button kbd {{color:inherit !important;border-color:currentColor !important;opacity:1 !important;}}
:focus-visible, [data-mr-focus]:focus {{outline:3px solid {FOCUS} !important;outline-offset:2px !important;}}
label:has(input[type='radio']:focus-visible), label:has(input[type='checkbox']:focus-visible)
{{outline:3px solid {FOCUS};outline-offset:2px;border-radius:4px;}}
[data-testid='stMain']:focus-visible {{outline-offset:-3px !important;}}
.mr-sr-only {{position:absolute !important;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;
  clip:rect(0 0 0 0);white-space:nowrap;border:0;}}
.mr-nav-head {{font-size:.8rem;font-weight:600;letter-spacing:.02em;color:#3d4150;margin:.6rem 0 0 .5rem;padding:0;}}
</style>"""


def apply_styles() -> None:
    """The colour and focus rules, on every page (a style element: nothing runs)."""
    st.html(STYLE)


# DOMPurify (Streamlit's sanitiser of st.html) removes a script whose text looks like markup.
_LOOKS_LIKE_MARKUP = re.compile(r"<[/\w!]")


def install_script() -> None:
    """The browser-side repairs (``a11y.js``), installed once per window.

    Not on the review page: its score panel, a component, runs the same code there, and that page
    carries no inline script.
    """
    if _LOOKS_LIKE_MARKUP.search(SCRIPT):
        raise ValueError("a11y.js would be dropped by the sanitiser: no '<' before a letter, '/' or '!'")
    st.html(f"<script>{SCRIPT}</script>", unsafe_allow_javascript=True)


def navigation(sections: Mapping[str, Sequence[st.Page]]) -> None:
    """The app's own page navigation, drawn where it is called (the sidebar).

    A heading per section, then its pages' links; ``a11y.js`` marks the container as the
    navigation landmark and the current page's link with ``aria-current``.
    """
    with st.container(key="mr-nav", gap="xxsmall"):
        for section, pages in sections.items():
            st.html(f'<h2 class="mr-nav-head">{html.escape(section)}</h2>')
            for page in pages:
                st.page_link(page, width="stretch")
