"""Render a task's material safely and clearly.

Everything that comes from a benchmark file or a model (question, options, injected sentences,
responses, reasoning, retracted-paper text) is untrusted: it goes through ``html.escape`` into
markup we write ourselves (``st.html``, which also sanitises), or through ``st.text``, which
never parses Markdown or HTML. Model responses and reasoning traces are often written in
Markdown: they go through ``text.markdown_subset``, which formats emphasis, headings, lists and
code and escapes everything else. So a response containing ``<script>``, ``<img src=...>`` or a
Markdown link shows as the literal text and cannot run code, load a remote image or link away.
"""

from __future__ import annotations

import html

import streamlit as st

from review_app.services.task_material import TaskMaterial
from review_app.ui.components.text import markdown_subset

STYLE = """
<style>
.mr-card {border:1px solid #d9dee7;border-radius:10px;padding:14px 16px;margin:0 0 12px 0;background:#fff;}
.mr-card h4 {margin:0 0 8px 0;font-size:0.8rem;letter-spacing:.04em;text-transform:uppercase;color:#5b6473;}
.mr-question {font-size:1.02rem;line-height:1.55;white-space:pre-wrap;}
.mr-options {list-style:none;padding:0;margin:0;}
.mr-options li {padding:6px 8px;border-radius:6px;margin:2px 0;line-height:1.45;}
.mr-label {display:inline-block;min-width:1.8em;font-weight:600;}
.mr-gold {background:#e7f6ec;}
.mr-target {background:#fdecea;}
.mr-model {outline:2px solid #6b7cff;}
.mr-tag {font-size:.72rem;font-weight:600;border-radius:10px;padding:1px 8px;margin-left:6px;white-space:nowrap;}
.mr-tag-gold {background:#1e7e34;color:#fff;}
.mr-tag-target {background:#b02a37;color:#fff;}
.mr-tag-model {background:#3b4bd8;color:#fff;}
.mr-context {border-left:5px solid #d9534f;background:#fff6f5;}
.mr-context p {margin:4px 0;line-height:1.5;white-space:pre-wrap;}
.mr-meta {font-size:.85rem;color:#444;}
.mr-meta b {color:#222;}
.mr-def {font-size:.82rem;color:#555;margin:2px 0 8px 0;}
</style>
"""
# Model output formatted from Markdown: the headings of a response are sized as part of it, not of the page.
MARKDOWN_STYLE = """
<style>
.mr-md {font-size:1rem;line-height:1.55;overflow-wrap:anywhere;}
.mr-md > :first-child {margin-top:0;}
.mr-md > :last-child {margin-bottom:0;}
.mr-md p, .mr-md ul, .mr-md ol, .mr-md pre, .mr-md blockquote {margin:0 0 .6em 0;}
.mr-md h1, .mr-md h2, .mr-md h3, .mr-md h4, .mr-md h5, .mr-md h6 {font-size:1rem;font-weight:600;margin:.8em 0 .3em 0;
  padding:0;line-height:1.4;}
.mr-md h1, .mr-md h2 {font-size:1.08rem;}
.mr-md ul, .mr-md ol {padding-left:1.4em;}
.mr-md li {margin:.1em 0;}
.mr-md code {font-size:.86em;background:#f0f2f6;border-radius:4px;padding:.05em .3em;}
.mr-md pre {background:#f6f8fa;border:1px solid #e3e7ee;border-radius:6px;padding:6px 8px;white-space:pre-wrap;}
.mr-md pre code {background:none;padding:0;}
.mr-md blockquote {border-left:3px solid #d9dee7;padding-left:.8em;color:#4a5261;}
.mr-md hr {border:none;border-top:1px solid #d9dee7;margin:.8em 0;}
</style>
"""
# Both, for a page that puts them up once (outside a fragment, whose reruns then send the cards alone).
STYLES = STYLE + MARKDOWN_STYLE


def esc(text: object) -> str:
    return html.escape("" if text is None else str(text), quote=True)


def _lang(view: TaskMaterial) -> str:
    return "zh-Hans" if view.language == "zh" else view.language or "en"


def question_card(view: TaskMaterial) -> str:
    return (
        f'<div class="mr-card" lang="{_lang(view)}"><h4>Question ({esc(view.subset)})</h4>'
        f'<div class="mr-question">{esc(view.question)}</div></div>'
    )


def options_card(view: TaskMaterial, *, show_target: bool, show_model: bool) -> str:
    rows = []
    for label, text in view.options:
        classes, tags = [], []
        if label == view.gold_label:
            classes.append("mr-gold")
            tags.append('<span class="mr-tag mr-tag-gold">gold answer</span>')
        if show_target and label == view.target_label:
            classes.append("mr-target")
            tags.append('<span class="mr-tag mr-tag-target">target (misleading)</span>')
        if show_model and label == view.model_answer:
            classes.append("mr-model")
            tags.append('<span class="mr-tag mr-tag-model">model chose</span>')
        label_html = f'<span class="mr-label">{esc(label)}.</span>'
        rows.append(f'<li class="{" ".join(classes)}">{label_html}{esc(text)}{"".join(tags)}</li>')
    extra = ""
    if show_model and not view.model_answer:
        extra = '<p class="mr-meta"><b>Model answer:</b> none could be read from the response.</p>'
    return (
        f'<div class="mr-card" lang="{_lang(view)}"><h4>Options</h4><ul class="mr-options">{"".join(rows)}</ul>'
        f"{extra}</div>"
    )


def context_card(title: str, sentences: list[tuple[str | None, str]], language: str) -> str:
    lang = "zh-Hans" if language == "zh" else language
    if not sentences:
        body = '<p class="mr-meta">No added context (clean condition).</p>'
    else:
        body = "".join(
            f"<p>{f'<b>{esc(label)}:</b> ' if label and len(sentences) > 1 else ''}{esc(text)}</p>"
            for label, text in sentences
        )
    return f'<div class="mr-card mr-context" lang="{lang}"><h4>{esc(title)}</h4>{body}</div>'


def taxonomy_card(view: TaskMaterial) -> str:
    parts = []
    if view.content_definition:
        content = view.content_definition
        parts.append(
            f'<p class="mr-meta"><b>Content type:</b> {esc(content.display_name)}</p>'
            f'<p class="mr-def">{esc(content.definition)} <i>Requires:</i> {esc(content.requires)} '
            f"<i>Not applicable when:</i> {esc(content.not_applicable_when)}</p>"
        )
    if view.provenance_definition:
        frame = view.provenance_definition
        parts.append(
            f'<p class="mr-meta"><b>Provenance:</b> {esc(frame.display_name)}</p>'
            f'<p class="mr-def">{esc(frame.definition)}</p>'
        )
    if not parts:
        return ""
    return f'<div class="mr-card"><h4>Attack labels</h4>{"".join(parts)}</div>'


def render_mcq(view: TaskMaterial, *, styled: bool = True) -> None:
    """Question, options and context for Rubric A and B, as the review protocol lists them
    (docs/review-app.md, "Reviewers' pages").

    For Rubric B the model response comes first: it is what the reviewer scores, and its start
    must be on screen without scrolling; the case it answers follows below it. ``styled=False``
    leaves the style rules out, for a page that has put :data:`STYLES` up itself.
    """
    is_a = view.rubric == "A"
    if not is_a and view.response_text is not None:
        render_response(view, styled=styled)
    blocks = [STYLE if styled else "", question_card(view), options_card(view, show_target=is_a, show_model=not is_a)]
    if is_a:
        target = [(view.target_label, view.target_sentence or "")] if view.target_sentence else []
        blocks.append(context_card("Misleading sentence for the target option", target, view.language))
    else:
        blocks.append(context_card("Injected context the model saw", view.injected_context, view.language))
    blocks.append(taxonomy_card(view))
    st.html("".join(blocks))


def model_text(text: str, lang: str, *, styled: bool = True) -> str:
    """Model output as HTML for ``st.html``: the safe Markdown subset formatted, everything else literal."""
    return f'{MARKDOWN_STYLE if styled else ""}<div class="mr-md" lang="{esc(lang)}">{markdown_subset(text)}</div>'


def render_response(view: TaskMaterial, *, styled: bool = True) -> None:
    """The model's final response (always visible) and its reasoning trace (collapsible)."""
    with st.container(border=True, key="mr-response"):
        st.caption("MODEL RESPONSE (model identity hidden)")
        st.html(model_text(view.response_text or "(empty response)", _lang(view), styled=styled))
    if view.reasoning:
        words = len(view.reasoning.split())
        with st.expander(f"Reasoning trace ({words:,} words)", expanded=len(view.reasoning) < 1200):
            st.html(model_text(view.reasoning, _lang(view), styled=styled))


def render_judge_audit(view: TaskMaterial, *, styled: bool = True) -> None:
    """The retracted study, the model response and the automatic judge's label (``styled`` as in
    :func:`render_mcq`)."""
    study = view.retracted
    rows = [
        ("Title", study.get("title")),
        ("Retracted finding (conclusion)", study.get("conclusion")),
        ("Question put to the model", study.get("problem")),
        ("Why it was retracted", study.get("note")),
    ]
    body = "".join(f'<p class="mr-meta"><b>{esc(k)}:</b> {esc(v)}</p>' for k, v in rows if v)
    st.html((STYLE if styled else "") + f'<div class="mr-card"><h4>Retracted study</h4>{body}</div>')
    render_response(view, styled=styled)
    label = view.judge.get("label")
    names = {1: "Polluted (relies on the retracted finding)", 0: "Neutral", -1: "Recognized (retraction noticed)"}
    with st.container(border=True):
        st.caption("AUTOMATIC JUDGE: the label you are auditing")
        st.text(f"Judge's label: {names.get(label, 'none (the judge left this trace flagged)')}")
        if view.judge.get("rationale"):
            st.text(f"Judge's rationale: {view.judge['rationale']}")
