"""Loaders for the source QA datasets a benchmark is generated from.

Each public dataset ships multiple-choice items in its own layout; every loader here turns rows
into ``MCQItem``s (no injection yet) and accounts for every row it did not keep, with the file,
line, field and a reason code, so a study lead can see what the benchmark was built from.
Options and answers are read out of the rows by ``bench_core.generation.source_options``.

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

import re
import string
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench_core.generation.source_options import (
    MAX_OPTIONS,
    RowDropped,
    check_options,
    extract_options,
    fold_text,
    match_answer,
    options_from_value,
    strip_instructions,
)
from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import Row, cell, iter_rows, tabular_files
from bench_core.kernel.text import detect_language
from bench_core.medmisbench import taxonomy
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


@dataclass
class _Context:
    file: Path
    line: int
    subset: str
    cop_base: int = 1
    reasoning_only: bool = True


def _required(row: Row, name: str) -> str:
    value = cell(row, name)
    if value is None:
        raise RowDropped("missing_field", name, f"no {name!r}")
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
    if language is None:
        language = taxonomy.item_language(ctx.subset, stem, options.values())
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
        raise RowDropped("invalid_item", where, first["msg"].removeprefix("Value error, ")) from exc


# -- one parser per format ---------------------------------------------------------------------


def _parse_medqa(row: Row, ctx: _Context) -> MCQItem:
    question = _required(row, "question")
    if row.get("options") in (None, "", [], {}):
        raise RowDropped("missing_field", "options", "no 'options'")
    options = check_options(options_from_value(row["options"]), "options")
    letter = cell(row, "answer_idx")
    text = cell(row, "answer")
    if letter is None and text is None:
        raise RowDropped("no_gold", "answer_idx", "neither 'answer_idx' nor 'answer' is given")
    if letter is not None:
        gold = match_answer(letter, options, "answer_idx")
        if text is not None and fold_text(text) != fold_text(options[gold]) and fold_text(text) != fold_text(gold):
            raise RowDropped(
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
        raise RowDropped("bad_options", missing, f"option column {missing!r} is empty")
    options = check_options({string.ascii_uppercase[i]: t or "" for i, t in enumerate(texts)}, "opa")
    index = _cop_index(row, ctx)
    if not 0 <= index < len(options):
        raise RowDropped(
            "gold_not_in_options", "cop", f"cop {row.get('cop')!r} is not among the {len(options)} options"
        )
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
        raise RowDropped("no_gold", "cop", "no 'cop' (correct option)")
    if re.fullmatch(r"[A-Ea-e]", raw):
        return ord(raw.lower()) - ord("a")
    number = _cop_value(row)
    if number is None:
        raise RowDropped("no_gold", "cop", f"cop {raw!r} is not a number or a letter a-e")
    if number < 0:
        raise RowDropped("no_gold", "cop", f"cop {number} (unlabelled item)")
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
        raise RowDropped("image_dependent", "images", "the item comes with images")
    question_type = cell(row, "question_type")
    if ctx.reasoning_only and question_type is not None and question_type.lower() != "reasoning":
        raise RowDropped("not_reasoning", "question_type", f"question_type {question_type!r}")
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
    options = check_options(options, "options")
    if not stem:
        raise RowDropped("missing_field", "question", "the question has no stem before its answer choices")
    answer = cell(row, "label") or cell(row, "answer")
    if answer is None:
        raise RowDropped("no_gold", "label", "no 'label' (correct option)")
    gold = match_answer(answer, options, "label")
    return _make_item(ctx, _item_id(row, ctx), stem, options, gold)


def _parse_medjourney(row: Row, ctx: _Context) -> MCQItem:
    prompt = _required(row, "prompt")
    target = _required(row, "target")
    found = extract_options(prompt)
    if found is None:
        raise RowDropped("not_multiple_choice", "prompt", "no lettered options in the prompt (free-form task)")
    stem, options, _trailing = found
    stem = strip_instructions(stem)
    if not stem:
        raise RowDropped("missing_field", "prompt", "nothing but instructions before the options")
    options = check_options(options, "prompt")
    gold = match_answer(target, options, "target")
    return _make_item(ctx, _item_id(row, ctx), stem, options, gold, language=detect_language(stem))


def _parse_hle(row: Row, ctx: _Context) -> MCQItem:
    category = cell(row, "category")
    subject = cell(row, "raw_subject")
    if category is not None:
        if fold_text(category).replace(" ", "") != HLE_MEDICAL_CATEGORY:
            raise RowDropped("not_medical", "category", f"category {category!r}")
    elif subject is None or fold_text(subject) not in HLE_MEDICAL_SUBJECTS:
        raise RowDropped("not_medical", "raw_subject", f"raw_subject {subject!r} is not a biology/medicine subject")
    if cell(row, "image") is not None:
        raise RowDropped("image_dependent", "image", "the item needs an image")
    answer_type = cell(row, "answer_type")
    if answer_type is not None and fold_text(answer_type).replace(" ", "") != "multiplechoice":
        raise RowDropped("not_multiple_choice", "answer_type", f"answer_type {answer_type!r}")
    question = _required(row, "question")
    found = extract_options(question)
    if found is None:
        raise RowDropped("not_multiple_choice", "question", "no answer choices in the question")
    stem, options, _trailing = found
    options = check_options(options, "question")
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
            raise RowDropped("missing_field", "options", "no 'options' and no opa.. columns")
        if None in columns:
            raise RowDropped(
                "bad_options", f"op{string.ascii_lowercase[columns.index(None)]}", "option columns have a gap"
            )
        options = {string.ascii_uppercase[i]: t or "" for i, t in enumerate(columns)}
    options = check_options(options, "options")
    answer = cell(row, "answer") or cell(row, "gold")
    if answer is None:
        raise RowDropped("no_gold", "answer", "no 'answer'")
    gold = match_answer(answer, options, "answer")
    subset = cell(row, "subset")
    if subset is not None:
        ctx = _Context(ctx.file, ctx.line, taxonomy.canonical_subset(subset), ctx.cop_base, ctx.reasoning_only)
    language = cell(row, "language")
    if language is not None and language not in ("en", "zh"):
        raise RowDropped("invalid_item", "language", f"language {language!r}; expected en or zh")
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
            except RowDropped as drop:
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
