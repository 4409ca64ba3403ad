"""Reading options and answers out of source rows, whatever layout a dataset wrote them in.

Public QA datasets hold options as dicts, lists, JSON strings or lines of the question ("A. x",
"(A) x", "A、x"), and answers as labels, labelled text or an option's text. These readers are
shared by every source format of ``bench_core.generation.sources``; each refuses what it cannot
read by raising ``RowDropped`` with a reason code, which the loader records against the row.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Mapping
from typing import Any

from bench_core.medmisbench.data import split_embedded_options

MAX_OPTIONS = 13  # the released format has option columns opa..opm


class RowDropped(Exception):
    """Raised by a row parser: the row is dropped for ``reason``."""

    def __init__(self, reason: str, field_name: str | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field_name
        self.message = message


_LINE_OPTION = re.compile(r"^\s*[(（]?\s*([A-Za-z])\s*[)）.．、:：]\s*(\S.*?)\s*$")
_CHOICES_HEADER = re.compile(r"(?:answer\s+choices|options|choices|选项)\s*[:：]?\s*$", re.I)
_LABEL_ANSWER = re.compile(r"^[(（]?\s*([A-Za-z])\s*(?:[)）.．、:：]\s*(.*)|\s+(.*)|)$", re.S)
_ANSWER_PREFIX = re.compile(r"^(?:正确答案|答案|参考答案|answer|correct answer)\s*(?:是|为)?\s*[:：]?\s*", re.I)
_INSTRUCTION_LINES = (
    re.compile(r"(选择题|单选题|多选题|选择最|选出|最佳答案|正确答案).*(请|选出|回答|作答|选择)"),
    re.compile(r"^(以下|下面|下列)(是|为).*(题|问题)"),
    re.compile(r"^请.*(答案|选项|回答|作答|输出|字母|选择)"),
    re.compile(r"^(答案|正确答案|参考答案)\s*[:：]?\s*$"),
    re.compile(r"^(answer|the answer is)\s*[:：]?\s*$", re.I),
    re.compile(r"^please\b.*\b(answer|letter|option|choose|select)\b", re.I),
)


def fold_text(text: str) -> str:
    """Text for exact comparison: case-folded, whitespace collapsed, end punctuation dropped."""
    return re.sub(r"\s+", " ", str(text)).strip().casefold().rstrip("。.．;；")


def _label(key: Any) -> str:
    text = str(key).strip()
    return text.upper() if len(text) == 1 and text.isalpha() else text


def options_from_value(value: Any) -> dict[str, str] | None:
    """Options from a dict, a list of ``{"key","value"}`` or strings, a JSON string or formatted text."""
    if isinstance(value, Mapping):
        return {_label(k): str(v).strip() if v is not None else "" for k, v in value.items()}
    if isinstance(value, list | tuple):
        if all(isinstance(v, Mapping) and "key" in v and "value" in v for v in value):
            return {_label(v["key"]): str(v["value"]).strip() for v in value}
        if all(isinstance(v, str) for v in value):
            return {string.ascii_uppercase[i]: v.strip() for i, v in enumerate(value[:26])}
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{") or text.startswith("["):
            try:
                return options_from_value(json.loads(text))
            except json.JSONDecodeError:
                return None
        found = extract_options(text, require_stem=False)
        return found[1] if found else None
    return None


def _line_block(lines: list[str]) -> tuple[int, int, dict[str, str]] | None:
    """The last run of consecutive lines labelled A, B, C ... (at least two): (start, end, options)."""
    best = None
    index = 0
    while index < len(lines):
        match = _LINE_OPTION.match(lines[index])
        if match and match.group(1).upper() == "A":
            options = {"A": match.group(2)}
            end = index + 1
            while end < len(lines):
                nxt = _LINE_OPTION.match(lines[end])
                expected = chr(ord("A") + len(options))
                if not nxt or nxt.group(1).upper() != expected:
                    break
                options[expected] = nxt.group(2)
                end += 1
            if len(options) >= 2:
                best = (index, end, options)
                index = end
                continue
        index += 1
    return best


def extract_options(text: str, *, require_stem: bool = True) -> tuple[str, dict[str, str], str] | None:
    """Split text holding a question and its options into (stem, options, text after the options).

    Options are either one per line ("A. x", "A、x", "(A) x", "A) x", "A: x") or inline
    "(A) x (B) y". A trailing "Answer Choices:" / "选项：" header is removed from the stem.
    Returns None when fewer than two options are found (or no stem, with ``require_stem``).
    """
    lines = text.splitlines()
    block = _line_block(lines)
    if block is not None:
        start, end, options = block
        stem = "\n".join(lines[:start]).strip()
        trailing = "\n".join(lines[end:]).strip()
    else:
        split = split_embedded_options(text)
        if split is None:
            return None
        stem, options = split
        trailing = ""
    stem = _CHOICES_HEADER.sub("", stem).strip()
    if require_stem and not stem:
        return None
    return stem, options, trailing


def strip_instructions(text: str) -> str:
    """Remove answer-format instruction lines (release-specific wording) from a stem."""
    kept = [line for line in text.splitlines() if not any(p.search(line.strip()) for p in _INSTRUCTION_LINES)]
    return "\n".join(kept).strip()


def match_answer(answer: str, options: Mapping[str, str], field_name: str) -> str:
    """The label an answer names: a label ("B", "(b)", "B. text") or the exact text of one option."""
    text = _ANSWER_PREFIX.sub("", str(answer).strip()).strip()
    if not text:
        raise RowDropped("no_gold", field_name, "empty answer")
    by_upper = {label.upper(): label for label in options}
    several = re.fullmatch(r"[A-Za-z]{2,}", text) and all(c.upper() in by_upper for c in text) and len(set(text)) > 1
    if several and text.upper() not in {fold_text(v).upper() for v in options.values()}:
        raise RowDropped("multiple_answers", field_name, f"answer {answer!r} names several options")
    match = _LABEL_ANSWER.match(text)
    if match and match.group(1).upper() in by_upper:
        label = by_upper[match.group(1).upper()]
        rest = (match.group(2) or match.group(3) or "").strip()
        if not rest or fold_text(rest) == fold_text(options[label]):
            return label
        if match.group(2) is not None:  # "B. text" with another option's text
            raise RowDropped("gold_mismatch", field_name, f"answer {answer!r}: label and text disagree")
    if text in options:
        return text
    folded = fold_text(text)
    hits = [label for label, option in options.items() if fold_text(option) == folded]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(options)
    raise RowDropped("gold_not_in_options", field_name, f"answer {answer!r} matches none of the options ({listed})")


def check_options(options: dict[str, str] | None, field_name: str) -> dict[str, str]:
    """The options unchanged when an item can carry them: 2 to ``MAX_OPTIONS``, non-empty, distinct, A, B, C ..."""
    if options is None:
        raise RowDropped("bad_options", field_name, "options could not be read")
    if len(options) < 2:
        raise RowDropped("bad_options", field_name, f"{len(options)} option(s); at least 2 are needed")
    if len(options) > MAX_OPTIONS:
        raise RowDropped("too_many_options", field_name, f"{len(options)} options; at most {MAX_OPTIONS} are supported")
    empty = [label for label, text in options.items() if not text.strip()]
    if empty:
        raise RowDropped("bad_options", field_name, f"empty text for option(s) {', '.join(empty)}")
    folded = Counter(fold_text(text) for text in options.values())
    repeated = [text for text, n in folded.items() if n > 1]
    if repeated:
        raise RowDropped("bad_options", field_name, f"two options have the same text ({repeated[0]!r})")
    labels = list(options)
    if labels not in (list(string.ascii_uppercase[: len(labels)]), [str(i + 1) for i in range(len(labels))]):
        listed = ", ".join(labels)
        raise RowDropped("bad_options", field_name, f"option labels {listed} do not run A, B, C ... (or 1, 2, 3 ...)")
    return options
