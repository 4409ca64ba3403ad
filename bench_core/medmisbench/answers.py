"""Answer extraction from free-text model responses.

Models are asked for ``{"thinking_process": ..., "answer_letter": ...}`` but do not always
comply, so extraction tries, in order: the structured JSON answer, "the answer is X",
"final answer: X", the last line that is only a label, and finally a unique option-text match.
The method that succeeded is returned with the label, so reports can show how much of a
model's score rests on fallbacks; an answer no step can read is ``label=None`` and counts as
incorrect (reported separately as unparseable). The raw text is never altered: callers keep it.
"""

from __future__ import annotations

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


def _numeric(options: Mapping[str, str]) -> bool:
    return all(label.isdigit() for label in options)


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
