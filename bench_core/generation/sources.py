"""Loaders for the source QA datasets a benchmark is generated from (SPEC 1.1, 1.3).

Each public dataset ships multiple-choice items in its own layout; every loader here turns rows
into ``MCQItem``s (no injection yet) and accounts for every row it did not keep, with the file,
line, field and a reason code, so a study lead can see what the benchmark was built from.

Layouts accepted (JSONL, JSON array, CSV or Parquet, via ``bench_core.kernel.tabular``):

- ``medqa``: ``{"question", "options": {"A": ...}, "answer_idx": "C", "answer": "<text>"}`` as in
  the jind11/MedQA release (US and Mainland); ``options`` may also be a list of
  ``{"key", "value"}`` (BigBio) or of strings. With only ``answer`` the text is matched to an
  option; with both they must agree.
- ``medmcqa``: ``{"id", "question", "opa".."opd", "cop", "choice_type", ...}``. ``cop`` is 1-4
  in the original GitHub JSON release and 0-3 in the Hugging Face copy (a ClassLabel ``a``..``d``,
  also accepted as letters). The base is detected per file: a 0 means 0-based, a 4 means 1-based;
  a file with only 1-3 is read as 1-based (the original release) and a note says so, unless
  ``cop_base`` is given. ``cop`` -1 (the unlabelled test split) has no gold and is dropped.
- ``medxpertqa``: ``{"id", "question", "options", "label", "images", "question_type", ...}``
  (TsinghuaC3I/MedXpertQA). ``options`` is a dict or a string ("(A) x (B) y", "A. x" lines or a
  JSON object). The "Answer Choices:" block is stripped from the stem. Items with images are
  dropped, and with ``reasoning_only`` (default) so are ``question_type`` "Understanding" items.
- ``medjourney``: ``{"prompt", "target"}`` in Chinese; the options are the "A. ..." / "A、..." /
  "(A) ..." lines of the prompt; answer-format instructions ("以下是...选择题，请...", "答案：")
  are removed from the stem; ``target`` is a label ("B", "B. 文本", "答案：B") or an option's text.
  Prompts without options are free-form tasks and are dropped.
- ``hle``: Humanity's Last Exam rows ``{"id", "question", "image", "answer", "answer_type",
  "raw_subject", "category"}``; only ``category`` "Biology/Medicine" (or, without a category, a
  medical ``raw_subject``), text-only (empty ``image``) multiple-choice items are kept; options
  come from the "Answer Choices:" lines; ``answer`` (a label or an option's text) is matched to
  an option.
- ``medrev``: the project's plain format ``{"id", "question", "options": {...}, "answer"}`` with
  optional ``subset`` and ``language``; options may instead be ``opa``.. columns (CSV).
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import Row, cell, iter_rows, tabular_files
from bench_core.kernel.text import detect_language
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.data import split_embedded_options
from bench_core.medmisbench.items import MCQItem

SOURCE_FORMATS: tuple[str, ...] = ("medqa", "medmcqa", "medxpertqa", "medjourney", "hle", "medrev")
DEFAULT_SUBSETS: dict[str, str] = {
    "medqa": "MEDMISQA",
    "medmcqa": "MEDMISMCQA",
    "medxpertqa": "MEDMISXPERTQA",
    "medjourney": "MEDMISJOURNEY",
    "hle": "MEDMISHLE",
    "medrev": "CUSTOM",
}
MAX_OPTIONS = 13  # the released format has option columns opa..opm

# Reason codes of dropped rows. The first group are rows the loader could not read as a
# well-formed item (``malformed``); the second are well-formed rows excluded by design.
REASONS: dict[str, str] = {
    "unreadable": "the record is not valid JSON / not an object",
    "missing_field": "a required field is missing or empty",
    "bad_options": "options missing, unparseable, fewer than 2, or duplicated",
    "too_many_options": f"more than {MAX_OPTIONS} options (the released format holds opa..opm)",
    "no_gold": "no gold answer (e.g. MedMCQA test split, cop -1)",
    "gold_not_in_options": "the gold answer matches no option",
    "gold_mismatch": "the answer label and answer text disagree",
    "multiple_answers": "more than one correct option",
    "duplicate_id": "an item with the same id was already loaded",
    "invalid_item": "the item failed validation",
    "image_dependent": "the item needs an image",
    "not_medical": "not a biology/medicine item",
    "not_multiple_choice": "free-form or exact-match item without options",
    "not_reasoning": "MedXpertQA 'Understanding' item (only reasoning items are kept)",
}
EXCLUDED_BY_DESIGN = frozenset({"image_dependent", "not_medical", "not_multiple_choice", "not_reasoning"})

HLE_MEDICAL_CATEGORY = "biology/medicine"
HLE_MEDICAL_SUBJECTS = frozenset(
    {
        "medicine",
        "biology",
        "genetics",
        "immunology",
        "neuroscience",
        "microbiology",
        "pharmacology",
        "anatomy",
        "physiology",
        "biochemistry",
        "molecular biology",
        "cell biology",
        "pathology",
        "epidemiology",
        "clinical medicine",
        "oncology",
        "cardiology",
        "surgery",
        "psychiatry",
        "public health",
    }
)


@dataclass(frozen=True)
class DroppedRow:
    """A source row not turned into an item: the reason code and where/what."""

    reason: str
    issue: RowIssue

    @property
    def malformed(self) -> bool:
        return self.reason not in EXCLUDED_BY_DESIGN

    def as_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "file": self.issue.file,
            "line": self.issue.line,
            "field": self.issue.field,
            "message": self.issue.message,
        }


@dataclass
class SourceReport:
    """What a source load kept, and why it dropped the rest."""

    format: str
    subset: str
    items: list[MCQItem] = field(default_factory=list)
    dropped: list[DroppedRow] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    n_rows: int = 0

    def counts(self) -> dict[str, int]:
        """Dropped rows per reason code, most frequent first."""
        return dict(Counter(d.reason for d in self.dropped).most_common())

    @property
    def malformed(self) -> list[DroppedRow]:
        return [d for d in self.dropped if d.malformed]

    def raise_if_malformed(self) -> None:
        """Refuse the load (``DatasetError`` listing every problem) when any row was malformed."""
        if self.malformed:
            raise DatasetError([d.issue for d in self.malformed])

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "subset": self.subset,
            "files": [str(f) for f in self.files],
            "n_rows": self.n_rows,
            "n_kept": len(self.items),
            "n_dropped": len(self.dropped),
            "dropped_by_reason": self.counts(),
            "notes": list(self.notes),
            "dropped": [d.as_dict() for d in self.dropped],
        }


class _Drop(Exception):
    """Raised by a row parser: the row is dropped for ``reason``."""

    def __init__(self, reason: str, field_name: str | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field_name
        self.message = message


@dataclass
class _Context:
    file: Path
    line: int
    subset: str
    cop_base: int = 1
    reasoning_only: bool = True


# -- option and answer helpers -----------------------------------------------------------------

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


def _fold(text: str) -> str:
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
        raise _Drop("no_gold", field_name, "empty answer")
    by_upper = {label.upper(): label for label in options}
    several = re.fullmatch(r"[A-Za-z]{2,}", text) and all(c.upper() in by_upper for c in text) and len(set(text)) > 1
    if several and text.upper() not in {_fold(v).upper() for v in options.values()}:
        raise _Drop("multiple_answers", field_name, f"answer {answer!r} names several options")
    match = _LABEL_ANSWER.match(text)
    if match and match.group(1).upper() in by_upper:
        label = by_upper[match.group(1).upper()]
        rest = (match.group(2) or match.group(3) or "").strip()
        if not rest or _fold(rest) == _fold(options[label]):
            return label
        if match.group(2) is not None:  # "B. text" with another option's text
            raise _Drop("gold_mismatch", field_name, f"answer {answer!r}: label and text disagree")
    if text in options:
        return text
    folded = _fold(text)
    hits = [label for label, option in options.items() if _fold(option) == folded]
    if len(hits) == 1:
        return hits[0]
    listed = ", ".join(options)
    raise _Drop("gold_not_in_options", field_name, f"answer {answer!r} matches none of the options ({listed})")


def _check_options(options: dict[str, str] | None, field_name: str) -> dict[str, str]:
    if options is None:
        raise _Drop("bad_options", field_name, "options could not be read")
    if len(options) < 2:
        raise _Drop("bad_options", field_name, f"{len(options)} option(s); at least 2 are needed")
    if len(options) > MAX_OPTIONS:
        raise _Drop("too_many_options", field_name, f"{len(options)} options; at most {MAX_OPTIONS} are supported")
    empty = [label for label, text in options.items() if not text.strip()]
    if empty:
        raise _Drop("bad_options", field_name, f"empty text for option(s) {', '.join(empty)}")
    folded = Counter(_fold(text) for text in options.values())
    repeated = [text for text, n in folded.items() if n > 1]
    if repeated:
        raise _Drop("bad_options", field_name, f"two options have the same text ({repeated[0]!r})")
    labels = list(options)
    if labels not in (list(string.ascii_uppercase[: len(labels)]), [str(i + 1) for i in range(len(labels))]):
        listed = ", ".join(labels)
        raise _Drop("bad_options", field_name, f"option labels {listed} do not run A, B, C ... (or 1, 2, 3 ...)")
    return options


def _required(row: Row, name: str) -> str:
    value = cell(row, name)
    if value is None:
        raise _Drop("missing_field", name, f"no {name!r}")
    return value


def _item_id(row: Row, ctx: _Context, *names: str) -> str:
    for name in (*names, "id"):
        value = cell(row, name)
        if value is not None:
            return value[:-2] if re.fullmatch(r"\d+\.0", value) else value
    return f"{ctx.file.stem}-{ctx.line}"


def _make_item(
    ctx: _Context, item_id: str, stem: str, options: dict[str, str], gold: str, language: str | None = None
) -> MCQItem:
    known = taxonomy.subset(ctx.subset)
    if language is None:
        language = detect_language(stem + " " + " ".join(options.values()))
        if known is not None and known.language == "zh":
            language = "zh"
    try:
        return MCQItem(
            id=item_id,
            subset=ctx.subset,
            language=language,
            question=stem,
            options=options,
            gold=gold,
            source_file=ctx.file.name,
            source_line=ctx.line,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise _Drop("invalid_item", where, first["msg"].removeprefix("Value error, ")) from exc


# -- one parser per format ---------------------------------------------------------------------


def _parse_medqa(row: Row, ctx: _Context) -> MCQItem:
    question = _required(row, "question")
    if row.get("options") in (None, "", [], {}):
        raise _Drop("missing_field", "options", "no 'options'")
    options = _check_options(options_from_value(row["options"]), "options")
    letter = cell(row, "answer_idx")
    text = cell(row, "answer")
    if letter is None and text is None:
        raise _Drop("no_gold", "answer_idx", "neither 'answer_idx' nor 'answer' is given")
    if letter is not None:
        gold = match_answer(letter, options, "answer_idx")
        if text is not None and _fold(text) != _fold(options[gold]) and _fold(text) != _fold(gold):
            raise _Drop(
                "gold_mismatch",
                "answer",
                f"'answer' {text!r} is not the text of option {gold} ({options[gold]!r}) named by 'answer_idx'",
            )
    else:
        gold = match_answer(text or "", options, "answer")
    return _make_item(ctx, _item_id(row, ctx), question, options, gold)


_MEDMCQA_COLUMNS = ("opa", "opb", "opc", "opd", "ope")


def _parse_medmcqa(row: Row, ctx: _Context) -> MCQItem:
    question = _required(row, "question")
    texts = [cell(row, c) for c in _MEDMCQA_COLUMNS]
    while texts and texts[-1] is None:
        texts.pop()
    if any(t is None for t in texts):
        missing = _MEDMCQA_COLUMNS[texts.index(None)]
        raise _Drop("bad_options", missing, f"option column {missing!r} is empty")
    options = _check_options({string.ascii_uppercase[i]: t or "" for i, t in enumerate(texts)}, "opa")
    index = _cop_index(row, ctx)
    if not 0 <= index < len(options):
        raise _Drop("gold_not_in_options", "cop", f"cop {row.get('cop')!r} is not among the {len(options)} options")
    return _make_item(ctx, _item_id(row, ctx), question, options, string.ascii_uppercase[index])


def _cop_value(row: Row) -> int | None:
    """``cop`` as an integer (letters a..e as 0..4 are handled by the caller); None when absent."""
    value = cell(row, "cop")
    if value is None:
        return None
    if re.fullmatch(r"-?\d+(\.0+)?", value):
        return int(float(value))
    return None


def _cop_index(row: Row, ctx: _Context) -> int:
    raw = cell(row, "cop")
    if raw is None:
        raise _Drop("no_gold", "cop", "no 'cop' (correct option)")
    if re.fullmatch(r"[A-Ea-e]", raw):
        return ord(raw.lower()) - ord("a")
    number = _cop_value(row)
    if number is None:
        raise _Drop("no_gold", "cop", f"cop {raw!r} is not a number or a letter a-e")
    if number < 0:
        raise _Drop("no_gold", "cop", f"cop {number} (unlabelled item)")
    return number - ctx.cop_base


def _detect_cop_base(rows: list[tuple[int, Row | RowIssue]], file: Path) -> tuple[int, str | None]:
    values = {v for _, row in rows if isinstance(row, dict) and (v := _cop_value(row)) is not None and v >= 0}
    if 0 in values and 4 in values:
        raise DatasetError(
            [
                RowIssue(
                    str(file),
                    None,
                    "cop",
                    "cop values include both 0 and 4: the file mixes 0-based and 1-based answers; "
                    "pass the base explicitly (cop_base / --cop-base)",
                )
            ]
        )
    if 0 in values:
        return 0, f"{file.name}: cop read as 0-based (a value 0 was seen)"
    if 4 in values:
        return 1, f"{file.name}: cop read as 1-based (a value 4 was seen)"
    return 1, (
        f"{file.name}: cop base could not be detected (only values 1-3 seen); read as 1-based as in the "
        "original MedMCQA release. Pass --cop-base 0 for a 0-based (Hugging Face) copy."
    )


_ANSWER_CHOICES = re.compile(r"\s*answer\s+choices\s*[:：]", re.I)


def _parse_medxpertqa(row: Row, ctx: _Context) -> MCQItem:
    images = row.get("images")
    if images not in (None, "", [], ()) and not (isinstance(images, float) and images != images):
        raise _Drop("image_dependent", "images", "the item comes with images")
    question_type = cell(row, "question_type")
    if ctx.reasoning_only and question_type is not None and question_type.lower() != "reasoning":
        raise _Drop("not_reasoning", "question_type", f"question_type {question_type!r}")
    question = _required(row, "question")
    options = options_from_value(row.get("options")) if row.get("options") not in (None, "") else None
    stem = question
    choices = _ANSWER_CHOICES.search(question)
    if choices:
        stem = question[: choices.start()].strip()
        if options is None:
            found = extract_options(question[choices.end() :], require_stem=False)
            options = found[1] if found else None
    elif (found := extract_options(question)) is not None:
        stem = found[0]
        options = options if options is not None else found[1]
    options = _check_options(options, "options")
    if not stem:
        raise _Drop("missing_field", "question", "the question has no stem before its answer choices")
    answer = cell(row, "label") or cell(row, "answer")
    if answer is None:
        raise _Drop("no_gold", "label", "no 'label' (correct option)")
    gold = match_answer(answer, options, "label")
    return _make_item(ctx, _item_id(row, ctx), stem, options, gold)


def _parse_medjourney(row: Row, ctx: _Context) -> MCQItem:
    prompt = _required(row, "prompt")
    target = _required(row, "target")
    found = extract_options(prompt)
    if found is None:
        raise _Drop("not_multiple_choice", "prompt", "no lettered options in the prompt (free-form task)")
    stem, options, _trailing = found
    stem = strip_instructions(stem)
    if not stem:
        raise _Drop("missing_field", "prompt", "nothing but instructions before the options")
    options = _check_options(options, "prompt")
    gold = match_answer(target, options, "target")
    return _make_item(ctx, _item_id(row, ctx), stem, options, gold, language=detect_language(stem))


def _parse_hle(row: Row, ctx: _Context) -> MCQItem:
    category = cell(row, "category")
    subject = cell(row, "raw_subject")
    if category is not None:
        if _fold(category).replace(" ", "") != HLE_MEDICAL_CATEGORY:
            raise _Drop("not_medical", "category", f"category {category!r}")
    elif subject is None or _fold(subject) not in HLE_MEDICAL_SUBJECTS:
        raise _Drop("not_medical", "raw_subject", f"raw_subject {subject!r} is not a biology/medicine subject")
    if cell(row, "image") is not None:
        raise _Drop("image_dependent", "image", "the item needs an image")
    answer_type = cell(row, "answer_type")
    if answer_type is not None and _fold(answer_type).replace(" ", "") != "multiplechoice":
        raise _Drop("not_multiple_choice", "answer_type", f"answer_type {answer_type!r}")
    question = _required(row, "question")
    found = extract_options(question)
    if found is None:
        raise _Drop("not_multiple_choice", "question", "no answer choices in the question")
    stem, options, _trailing = found
    options = _check_options(options, "question")
    gold = match_answer(_required(row, "answer"), options, "answer")
    return _make_item(ctx, _item_id(row, ctx), stem, options, gold)


def _parse_medrev(row: Row, ctx: _Context) -> MCQItem:
    question = _required(row, "question")
    if row.get("options") not in (None, "", [], {}):
        options = options_from_value(row["options"])
    else:
        columns = [cell(row, f"op{c}") for c in string.ascii_lowercase[:MAX_OPTIONS]]
        while columns and columns[-1] is None:
            columns.pop()
        if not columns:
            raise _Drop("missing_field", "options", "no 'options' and no opa.. columns")
        if None in columns:
            raise _Drop("bad_options", f"op{string.ascii_lowercase[columns.index(None)]}", "option columns have a gap")
        options = {string.ascii_uppercase[i]: t or "" for i, t in enumerate(columns)}
    options = _check_options(options, "options")
    answer = cell(row, "answer") or cell(row, "gold")
    if answer is None:
        raise _Drop("no_gold", "answer", "no 'answer'")
    gold = match_answer(answer, options, "answer")
    subset = cell(row, "subset")
    if subset is not None:
        ctx = _Context(ctx.file, ctx.line, taxonomy.canonical_subset(subset), ctx.cop_base, ctx.reasoning_only)
    language = cell(row, "language")
    if language is not None and language not in ("en", "zh"):
        raise _Drop("invalid_item", "language", f"language {language!r}; expected en or zh")
    return _make_item(ctx, _item_id(row, ctx), question, options, gold, language=language)


_PARSERS: dict[str, Callable[[Row, _Context], MCQItem]] = {
    "medqa": _parse_medqa,
    "medmcqa": _parse_medmcqa,
    "medxpertqa": _parse_medxpertqa,
    "medjourney": _parse_medjourney,
    "hle": _parse_hle,
    "medrev": _parse_medrev,
}


def load_source(
    path: str | Path,
    fmt: str,
    *,
    subset: str | None = None,
    cop_base: int | None = None,
    reasoning_only: bool = True,
    strict: bool = False,
) -> SourceReport:
    """Load a source dataset (file or folder of files) in format ``fmt`` into items without injections.

    Every row is either an item or a ``DroppedRow`` with its reason code; duplicate (subset, id)
    pairs keep the first. ``subset`` overrides the format's default subset name. With ``strict``,
    any malformed row (not rows excluded by design) refuses the whole load with ``DatasetError``.
    """
    if fmt not in _PARSERS:
        raise ValueError(f"unknown source format {fmt!r}; expected one of {', '.join(SOURCE_FORMATS)}")
    if cop_base not in (None, 0, 1):
        raise ValueError("cop_base must be 0, 1 or None (detect)")
    subset_id = taxonomy.canonical_subset(subset or DEFAULT_SUBSETS[fmt])
    report = SourceReport(format=fmt, subset=subset_id)
    seen: dict[tuple[str, str], str] = {}
    parse = _PARSERS[fmt]
    for file in tabular_files(Path(path)):
        report.files.append(file)
        rows = list(iter_rows(file))
        base = 1
        if fmt == "medmcqa":
            if cop_base is None:
                base, note = _detect_cop_base(rows, file)
                if note:
                    report.notes.append(note)
            else:
                base = cop_base
        for line, row in rows:
            report.n_rows += 1
            if isinstance(row, RowIssue):
                report.dropped.append(DroppedRow("unreadable", row))
                continue
            ctx = _Context(file, line, subset_id, base, reasoning_only)
            try:
                item = parse(row, ctx)
            except _Drop as drop:
                report.dropped.append(DroppedRow(drop.reason, RowIssue(str(file), line, drop.field, drop.message)))
                continue
            except InputError as exc:  # a list or object where text belongs
                report.dropped.append(DroppedRow("malformed", exc.as_issue()))
                continue
            key = (item.subset, item.id)
            if key in seen:
                message = f"duplicate item id {item.id!r} in {item.subset} (first at {seen[key]})"
                report.dropped.append(DroppedRow("duplicate_id", RowIssue(str(file), line, "id", message)))
                continue
            seen[key] = f"{file.name}:{line}"
            report.items.append(item)
    if strict:
        report.raise_if_malformed()
    return report
