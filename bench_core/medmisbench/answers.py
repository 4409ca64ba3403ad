"""Answer extraction from free-text model responses.

Models are asked for ``{"thinking_process": ..., "answer_letter": ...}`` but do not always
comply, so extraction tries, in order: the structured JSON answer, "the answer is X",
"final answer: X", the last line that is only a label, and finally a unique option-text match.
The method that succeeded is returned with the label, so reports can show how much of a
model's score rests on fallbacks; an answer no step can read is ``label=None`` and counts as
incorrect (reported separately as unparseable). The raw text is never altered: callers keep it.

``read_as_authors`` is the other reading: the authors' notebook's, step for step (protocol
``authors``); ``read_answer`` picks one by protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bench_core.kernel.text import CJK, json_objects, strip_think

ANSWER_KEYS = ("answer_letter", "answer", "final_answer", "answer_label", "choice", "option")
REASONING_KEYS = ("thinking_process", "reasoning", "thinking", "rationale", "explanation")


@dataclass(frozen=True)
class ParsedAnswer:
    """The chosen option label (None when unreadable), how it was found, and any JSON reasoning."""

    label: str | None
    method: str
    reasoning: str | None = None

    @property
    def parseable(self) -> bool:
        return self.label is not None


def normalise_label(value: Any, options: Mapping[str, str]) -> str | None:
    """Map "B", "(b)", "B.", "Option B", "B: text", 2 or an option's exact text to a label."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    if not text:
        return None
    by_upper = {label.upper(): label for label in options}
    if text.upper() in by_upper:
        return by_upper[text.upper()]
    match = re.match(r"^\W*(?:option|choice|answer)?\s*[(\[]?\s*([A-Za-z]|\d{1,2})\s*[)\].:]?(?:\s|$)", text, re.I)
    if match and match.group(1).upper() in by_upper:
        return by_upper[match.group(1).upper()]
    folded = _fold(text)
    for label, option in options.items():
        if _fold(option) == folded:
            return label
    return None


def extract_answer(text: str | None, options: Mapping[str, str]) -> ParsedAnswer:
    """Read the chosen option from a response; see the module docstring for the order of attempts."""
    text = text or ""
    structured = _json_answer(text, options)
    reasoning = structured.reasoning if structured else None
    if structured and structured.label is not None:
        return structured
    stripped = strip_think(text)
    letters = _label_pattern(options)
    for method, pattern in (
        ("answer_is", rf"(?i:answer\s+is|答案\s*(?:是|为))\W{{0,4}}(?i:option\s*)?[(\[]?\s*({letters})(?![A-Za-z0-9])"),
        (
            "final_answer",
            rf"(?i:final\s+answer|answer\s*:|答案\s*[:：])\W{{0,6}}(?i:is\W{{0,3}})?(?i:option\s*)?[(\[]?\s*({letters})(?![A-Za-z0-9])",
        ),
    ):
        found = re.findall(pattern, stripped)
        if found:
            return ParsedAnswer(found[-1], method, reasoning)
    for line in reversed(stripped.splitlines()):
        match = re.fullmatch(rf"[\W_]*(?i:option\s*|answer\s*)?[(\[]?\s*({letters})\s*[)\].:]?[\W_]*", line.strip())
        if match and match.group(1) in options:
            return ParsedAnswer(match.group(1), "label_line", reasoning)
        if line.strip():
            break
    label = _option_text_match(stripped, options)
    if label is not None:
        return ParsedAnswer(label, "option_text", reasoning)
    return ParsedAnswer(None, "unparseable", reasoning)


def _json_answer(text: str, options: Mapping[str, str]) -> ParsedAnswer | None:
    for candidate in json_objects(strip_think(text).strip()):
        lowered = {str(k).lower(): v for k, v in candidate.items()}
        keys = [k for k in ANSWER_KEYS if k in lowered]
        if not keys:
            continue
        reasoning = next((str(lowered[k]) for k in REASONING_KEYS if isinstance(lowered.get(k), str)), None)
        label = normalise_label(lowered[keys[0]], options)
        return ParsedAnswer(label, "json", reasoning)
    return None


def _label_pattern(options: Mapping[str, str]) -> str:
    labels = sorted(options, key=len, reverse=True)
    return "|".join(re.escape(label) for label in labels)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


def _option_text_match(text: str, options: Mapping[str, str]) -> str | None:
    """The one option whose text occurs in the response (ignoring options contained in another match).

    Latin text is matched on word boundaries; Chinese text, which has no spaces, as a substring.
    """
    folded = f" {_fold(text)} "

    def occurs(option: str) -> bool:
        return option in folded if CJK.search(option) else f" {option} " in folded

    hits = {label: _fold(option) for label, option in options.items() if _fold(option) and occurs(_fold(option))}
    maximal = [label for label, t in hits.items() if not any(t != u and t in u for u in hits.values())]
    return maximal[0] if len(maximal) == 1 else None


# -- the authors' answer reading ----------------------------------------------------------------
#
# What the authors' notebook reads from a reply (Step 3: ``maybe_parse_structured_response``;
# Step 4: ``evaluate_single_case_worker`` and ``extract_answer_letter``), step for step, so that
# the same reply gets the same label: the ``answer_letter`` of the JSON object (the whole reply
# after a code fence is removed, else the text from its first "{" to its last "}"), upper-cased,
# with every "." and ")" removed and a leading "OPTION " dropped; if that is not an option label,
# their four patterns over the upper-cased reply (the last match of the first pattern that
# matches, kept only if it is a label), then the last line that is only a label once brackets,
# dots, colons and spaces around it are stripped, then the first option (in listing order) whose
# text, reduced to lower-case ASCII words, occurs in the reply so reduced. An ``answer_letter``
# of "NONE" or an empty reply is an error in their code; the fallbacks then read the reply, or
# their error message, which is reproduced here.

AUTHORS_PATTERNS = (
    ("answer_is", r"THE ANSWER IS\s*\[?([A-Z0-9]+)\]?"),
    ("final_answer", r"FINAL ANSWER\s*[:\-]?\s*\[?([A-Z0-9]+)\]?"),
    ("answer", r"ANSWER\s*[:\-]?\s*\[?([A-Z0-9]+)\]?"),
    ("option", r"OPTION\s+([A-Z0-9]+)"),
)
NONE_ANSWER_ERROR = "API Error: ValueError: Model outputted 'NONE'"
EMPTY_RESPONSE_ERROR = "API Error: ValueError: Model returned an empty response"


def _authors_strip_fences(text: str) -> str:
    text = (text or "").strip()
    if text.startswith("```"):
        lines = text.splitlines()
        if lines:
            lines = lines[1:]
        if lines and lines[-1].strip() == "```":
            lines = lines[:-1]
        text = "\n".join(lines).strip()
    return text


def _authors_json(raw_text: str) -> tuple[str, str] | None:
    """(thinking_process, answer_letter) of the reply's JSON object, or None where their parse fails."""
    text = _authors_strip_fences(raw_text)
    if not text:
        return None
    try:
        json.loads(text)
        candidate = text
    except Exception:
        start, end = text.find("{"), text.rfind("}")
        if start == -1 or end == -1 or end <= start:
            return None
        candidate = text[start : end + 1]
    try:
        payload = json.loads(candidate)
    except Exception:
        return None
    if not isinstance(payload, dict):
        return None
    answer = str(payload.get("answer_letter", "")).strip()
    if not answer:
        return None
    return str(payload.get("thinking_process", "")).strip(), answer


def _authors_normalise(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^A-Za-z0-9]+", " ", text or "")).strip().lower()


def authors_fallback(text: str, options: Mapping[str, str]) -> tuple[str | None, str]:
    """The notebook's ``extract_answer_letter``: (label or None, the step that found it)."""
    if not text:
        return None, "unparseable"
    upper = text.upper()
    for method, pattern in AUTHORS_PATTERNS:
        matches = re.findall(pattern, upper)
        if matches:
            candidate = matches[-1].strip().rstrip(".)")
            if candidate in options:
                return candidate, method
    for line in reversed(text.splitlines()):
        candidate = line.strip().upper().strip("[]().: ")
        if candidate in options:
            return candidate, "label_line"
    response = _authors_normalise(text)
    for label, option in options.items():
        folded = _authors_normalise(option)
        if folded and folded in response:
            return label, "option_text"
    return None, "unparseable"


def read_as_authors(text: str | None, options: Mapping[str, str]) -> ParsedAnswer:
    """The option the authors' notebook reads from the reply ``text`` (the model's final text, no trace).

    ``reasoning`` is their ``thinking_process`` (the JSON's, else the whole reply, else their error
    message); ``method`` is ``json`` for the ``answer_letter`` key, else the fallback step.
    """
    raw_text = (text or "").strip()
    parsed = _authors_json(raw_text)
    thinking, answer = parsed if parsed is not None else (raw_text, "")
    if answer and answer.upper() == "NONE":
        thinking = NONE_ANSWER_ERROR
    elif not answer and not raw_text and not thinking:
        thinking = EMPTY_RESPONSE_ERROR
    clean = answer.strip().upper() if answer else ""
    clean = re.sub(r"[\.\)]", "", clean).strip()
    if clean.startswith("OPTION "):
        clean = clean.replace("OPTION ", "").strip()
    if clean in options:
        return ParsedAnswer(clean, "json", thinking or None)
    label, method = authors_fallback(raw_text or thinking, options)
    return ParsedAnswer(label, method, thinking or None)


def read_answer(text: str | None, options: Mapping[str, str], protocol: str) -> ParsedAnswer:
    """The answer under ``protocol``: the authors' reading, or medrev's ``extract_answer`` (strict)."""
    return read_as_authors(text, options) if protocol == "authors" else extract_answer(text, options)
