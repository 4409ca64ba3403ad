"""Loader for the released (flattened) MedMisBench format.

One file per subset (``MEDMISQA.jsonl`` ...) or one file with a ``subset`` column, as JSONL,
JSON, CSV or Parquet. Options come from ``opa``..``opm`` or, when those are absent, from
"(A) text (B) text" embedded in the stem. Gold labels are letters or 1-based numbers; with
numbers, option N is the N-th ``op*`` column and the item keeps numeric labels "1".."n".
Injections ``injecta``..``injectm`` are aligned with the options. Content types and provenances
in any spelling seen in releases are mapped to the canonical ids of ``bench_core.medmisbench.taxonomy``.
Optional columns written by ``bench generate`` (``generator_model``, ``prompt_version``,
``difficulty``, ``mislead_score``) are read into the bundle when present.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.tabular import Row, cell, iter_rows, tabular_files
from bench_core.kernel.text import detect_language
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import InjectionBundle, MCQItem

OPTION_LETTERS = string.ascii_lowercase[:13]  # a..m, as in the release
_EMBEDDED = re.compile(r"\(([A-M])\)\s*")
_INT_LIKE = re.compile(r"^\d+(\.0+)?$")


@dataclass
class LoadReport:
    """What a load produced: the items, and every row that could not be loaded."""

    items: list[MCQItem] = field(default_factory=list)
    issues: list[RowIssue] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def raise_if_issues(self) -> None:
        if self.issues:
            raise DatasetError(self.issues)


def split_embedded_options(text: str) -> tuple[str, dict[str, str]] | None:
    """Split "stem (A) x (B) y" into the stem and ordered options, or None if there are none.

    Labels must run A, B, C ... in order; a stray "(C)" inside an option's text before "(B)"
    is not taken for a label.
    """
    positions: list[tuple[str, int, int]] = []
    expected = "A"
    for match in _EMBEDDED.finditer(text):
        if match.group(1) == expected:
            positions.append((expected, match.start(), match.end()))
            expected = chr(ord(expected) + 1)
    if len(positions) < 2:
        return None
    stem = text[: positions[0][1]].strip()
    options: dict[str, str] = {}
    for index, (label, _start, end) in enumerate(positions):
        stop = positions[index + 1][1] if index + 1 < len(positions) else len(text)
        options[label] = text[end:stop].strip()
    return stem, options


def _row_to_item(row: Row, *, file: Path, line: int, default_subset: str) -> MCQItem | RowIssue:
    def issue(field_name: str | None, message: str) -> RowIssue:
        return RowIssue(str(file), line, field_name, message)

    item_id = cell(row, "id")
    if item_id is None:
        return issue("id", "missing item id")
    if item_id.endswith(".0") and _INT_LIKE.match(item_id):
        item_id = item_id[:-2]
    question = cell(row, "question")
    if question is None:
        return issue("question", f"item {item_id!r} has no question text")
    answer = cell(row, "answer")
    if answer is None:
        return issue("answer", f"item {item_id!r} has no gold answer")

    columns = [letter for letter in OPTION_LETTERS if cell(row, f"op{letter}") is not None]
    numeric = bool(_INT_LIKE.match(answer))
    if columns:
        if columns != list(OPTION_LETTERS[: len(columns)]):
            return issue("op" + OPTION_LETTERS[len(columns) - 1], "option columns have a gap")
        labels = [str(i + 1) for i in range(len(columns))] if numeric else [c.upper() for c in columns]
        options = {label: cell(row, f"op{c}") or "" for label, c in zip(labels, columns, strict=True)}
        stem = question
    else:
        split = split_embedded_options(question)
        if split is None:
            return issue(
                "question", f"item {item_id!r} has no op* columns and no '(A) ... (B) ...' options in the stem"
            )
        stem, options = split
        labels = list(options)
        columns = list(OPTION_LETTERS[: len(labels)])

    if numeric:
        number = int(float(answer))
        if not 1 <= number <= len(labels):
            return issue("answer", f"gold answer {answer!r} is not among the {len(labels)} options")
        gold = labels[number - 1]
    else:
        gold = answer.upper()
        if gold not in options:
            return issue("answer", f"gold answer {answer!r} is not among the options ({', '.join(labels)})")

    sentences = {
        label: text
        for label, column in zip(labels, columns, strict=True)
        if (text := cell(row, f"inject{column}")) is not None
    }
    extra = sorted(c for c in OPTION_LETTERS[len(columns) :] if cell(row, f"inject{c}") is not None)
    if extra:
        return issue(f"inject{extra[0]}", "injection given for an option that does not exist")

    injection = None
    content = cell(row, "injection_content")
    provenance = cell(row, "injection_provenance")
    if sentences or content or provenance:
        if content is None:
            return issue("injection_content", "injections present but no content type")
        if provenance is None:
            return issue("injection_provenance", "injections present but no provenance")
        try:
            content_id = taxonomy.canonical_content_type(content)
        except taxonomy.UnknownLabelError as exc:
            return issue("injection_content", str(exc))
        try:
            provenance_id = taxonomy.canonical_provenance(provenance)
        except taxonomy.UnknownLabelError as exc:
            return issue("injection_provenance", str(exc))
        scores: dict[str, float] = {}
        for name in ("difficulty", "mislead_score"):
            value = cell(row, name)
            if value is None:
                continue
            try:
                scores[name] = float(value)
            except ValueError:
                return issue(name, f"{name} {value!r} is not a number")
            if not 0 <= scores[name] <= 10:
                return issue(name, f"{name} {value} is outside 0-10")
        injection = InjectionBundle(
            sentences=sentences,
            content_type=content_id,
            provenance=provenance_id,
            generator_model=cell(row, "generator_model"),
            prompt_version=cell(row, "prompt_version"),
            **scores,
        )

    subset_name = cell(row, "subset") or default_subset
    known = taxonomy.subset(subset_name)
    language = cell(row, "language") or detect_language(stem + " " + " ".join(options.values()))
    if known is not None and known.language == "zh":
        language = "zh"
    try:
        return MCQItem(
            id=item_id,
            subset=subset_name,
            language=language,
            question=stem,
            options=options,
            gold=gold,
            injection=injection,
            source_file=file.name,
            source_line=line,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        return issue(where, first["msg"].removeprefix("Value error, "))


def load_medmisbench(path: str | Path, *, strict: bool = False) -> LoadReport:
    """Load items in the released flattened format from a file or a folder of subset files.

    Every row either becomes an item or is reported in ``issues`` with file, line and field.
    With ``strict`` the first problem refuses the whole load (``DatasetError`` listing all of them).
    Duplicate (subset, id) pairs are reported; the first occurrence is kept.
    """
    report = LoadReport()
    seen: dict[tuple[str, str], str] = {}
    for file in tabular_files(Path(path)):
        report.files.append(file)
        default_subset = taxonomy.canonical_subset(file.stem)
        for line, row in iter_rows(file):
            if isinstance(row, RowIssue):
                report.issues.append(row)
                continue
            result = _row_to_item(row, file=file, line=line, default_subset=default_subset)
            if isinstance(result, RowIssue):
                report.issues.append(result)
                continue
            key = (result.subset, result.id)
            if key in seen:
                report.issues.append(
                    RowIssue(
                        str(file),
                        line,
                        "id",
                        f"duplicate item id {result.id!r} in {result.subset} (first at {seen[key]})",
                    )
                )
                continue
            seen[key] = f"{file.name}:{line}"
            report.items.append(result)
    if strict:
        report.raise_if_issues()
    return report
