"""Loader for the released (flattened) MedMisBench format.

One file per subset (``MEDMISQA.jsonl`` ...) or one file with a ``subset`` column, as JSONL,
JSON, CSV or Parquet. Options come from ``opa``..``opm`` or, when none of those has a value, from
"(A) text (B) text" embedded in the stem. Gold labels are letters or 1-based numbers; an option's
label comes from its column (``opc`` is "C", or "3" when the answer is a number), so a column left
empty keeps the labels of the others. Injections ``injecta``..``injectm`` are aligned with the
options. Content types and provenances in any spelling seen in releases are mapped to the canonical
ids of ``bench_core.medmisbench.taxonomy``. Optional columns written by ``bench generate`` and the
release export (``type1_target``, ``generator_model``, ``prompt_version``, ``difficulty``,
``mislead_score``) are read when present.

Placeholder cells: a cell that is empty, ``"nan"`` (a pandas NaN written as text) or a lone ``"``
(a CSV quoting artefact) is treated as absent in option and injection columns, as the authors'
notebook does; the release has all three.

Two readings of a row (``reading``):

- ``"medrev"`` (protocol ``strict``): the item is checked (gold among at least two options, the
  stem stripped), embedded options must run (A), (B), (C) ... in order.
- ``"authors"`` (protocol ``authors``): what the authors' notebook (``reconstruct_dicts``) reads
  from the row, so that the prompt is theirs: the stem is kept unstripped, embedded options are
  any ``(LABEL)`` of A-M or digits, the stem before them loses trailing spaces, colons, newlines and
  quotes and each option text its surrounding quotes; a gold answer is a number only when it is all
  digits. Rows the notebook evaluates although medrev would refuse them (a gold label whose option
  is a placeholder, fewer than two options) load, with a warning.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import Row, cell, iter_rows, tabular_files
from bench_core.kernel.text import detect_language
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import InjectionBundle, MCQItem

OPTION_LETTERS = string.ascii_lowercase[:13]  # a..m, as in the release
# The authors' notebook reads op*/inject* columns a..z; a release never has more than a..m.
AUTHORS_LETTERS = string.ascii_lowercase
_EMBEDDED = re.compile(r"\(([A-M])\)\s*")
# The authors' notebook: any "(LABEL)" of capitals A-M or digits, the text up to the next one.
_AUTHORS_EMBEDDED = re.compile(r"\(([A-M0-9]+)\)\s*(.*?)(?=\s*\([A-M0-9]+\)\s*|$)", re.DOTALL)
_INT_LIKE = re.compile(r"^\d+(\.0+)?$")
PLACEHOLDERS = frozenset({"nan", '"'})
READINGS = ("medrev", "authors")


@dataclass
class LoadReport:
    """What a load produced: the items, every row that could not be loaded, and notes on loaded rows.

    ``warnings`` name rows that loaded but that medrev's own reading would have refused (the
    authors' reading evaluates them as the notebook does).
    """

    items: list[MCQItem] = field(default_factory=list)
    issues: list[RowIssue] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    warnings: list[RowIssue] = field(default_factory=list)

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


def value(row: Row, key: str) -> str | None:
    """An option or injection cell as stripped text; None when missing, empty, NaN or a placeholder."""
    text = cell(row, key)
    return None if text is None or text in PLACEHOLDERS else text


def authors_embedded_options(question: str) -> tuple[str, dict[str, str]] | None:
    """The authors' split of a stem with embedded options: (raw stem, options), or None without any.

    The stem is the text before the first "(LABEL)" with trailing spaces, colons, newlines and double
    quotes removed (leading whitespace kept); an option's text is stripped of whitespace and
    surrounding double quotes; an empty option is left out, a repeated label keeps its last text.
    """
    matches = list(_AUTHORS_EMBEDDED.finditer(question))
    if not matches:
        return None
    options: dict[str, str] = {}
    for match in matches:
        text = match.group(2).strip().strip('"').strip()
        if text:
            options[match.group(1).strip().upper()] = text
    if not options:
        return None
    return question[: matches[0].start()].rstrip(' :\n"'), options


def _row_to_item(
    row: Row, *, file: Path, line: int, default_subset: str, reading: str = "medrev"
) -> MCQItem | RowIssue:
    def issue(field_name: str | None, message: str) -> RowIssue:
        return RowIssue(str(file), line, field_name, message)

    if reading == "authors":
        return _authors_row_to_item(row, issue=issue, file=file, line=line, default_subset=default_subset)

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

    columns = [letter for letter in OPTION_LETTERS if value(row, f"op{letter}") is not None]
    numeric = bool(_INT_LIKE.match(answer))
    if columns:
        labels = [_column_label(c, numeric) for c in columns]
        options = {label: value(row, f"op{c}") or "" for label, c in zip(labels, columns, strict=True)}
        stem = question
        embedded = False
    else:
        split = split_embedded_options(question)
        if split is None:
            return issue(
                "question", f"item {item_id!r} has no op* columns and no '(A) ... (B) ...' options in the stem"
            )
        stem, options = split
        labels = list(options)
        columns = list(OPTION_LETTERS[: len(labels)])
        embedded = True

    if numeric:
        number = int(float(answer))
        # option N is column N (label "N"); embedded options keep their letters, the N-th of them
        gold = str(number) if not embedded else (labels[number - 1] if 1 <= number <= len(labels) else "")
        if gold not in options:
            return issue("answer", f"gold answer {answer!r} is not among the {len(labels)} options")
    else:
        gold = answer.upper()
        if gold not in options:
            return issue("answer", f"gold answer {answer!r} is not among the options ({', '.join(labels)})")

    sentences = {
        label: text
        for label, column in zip(labels, columns, strict=True)
        if (text := value(row, f"inject{column}")) is not None
    }
    extra = sorted(c for c in OPTION_LETTERS if c not in columns and value(row, f"inject{c}") is not None)
    if extra:
        return issue(f"inject{extra[0]}", "injection given for an option that does not exist")
    return _finish(
        row,
        issue=issue,
        file=file,
        line=line,
        default_subset=default_subset,
        item_id=item_id,
        stem=stem,
        options=options,
        gold=gold,
        sentences=sentences,
        reading="medrev",
        raw_question=None,
    )


def _column_label(column: str, numeric: bool) -> str:
    """The label of option column ``op<column>``: its letter, or its 1-based position with numeric answers."""
    return str(AUTHORS_LETTERS.index(column) + 1) if numeric else column.upper()


def _authors_row_to_item(row: Row, *, issue, file: Path, line: int, default_subset: str) -> MCQItem | RowIssue:
    """The row as the authors' notebook reads it (``reconstruct_dicts``); see the module docstring."""
    item_id = cell(row, "id")
    if item_id is None:
        return issue("id", "missing item id")
    if item_id.endswith(".0") and _INT_LIKE.match(item_id):
        item_id = item_id[:-2]
    raw = row.get("question")
    if raw is None or (isinstance(raw, float) and raw != raw) or not str(raw).strip():
        return issue("question", f"item {item_id!r} has no question text")
    raw_question = str(raw)
    answer = cell(row, "answer")
    if answer is None:
        return issue("answer", f"item {item_id!r} has no gold answer")
    numeric = answer.isdigit()
    options: dict[str, str] = {}
    sentences: dict[str, str] = {}
    for column in AUTHORS_LETTERS:
        label = _column_label(column, numeric)
        if (text := value(row, f"op{column}")) is not None:
            options[label] = text
        if (text := value(row, f"inject{column}")) is not None:
            sentences[label] = text
    if not options:
        split = authors_embedded_options(raw_question)
        if split is not None:
            raw_question, options = split
    stem = raw_question.strip()
    if not stem:
        return issue("question", f"item {item_id!r} has no question text before its embedded options")
    return _finish(
        row,
        issue=issue,
        file=file,
        line=line,
        default_subset=default_subset,
        item_id=item_id,
        stem=stem,
        options=options,
        gold=answer.upper(),
        sentences=sentences,
        reading="authors",
        raw_question=None if raw_question == stem else raw_question,
    )


def _finish(
    row: Row,
    *,
    issue,
    file: Path,
    line: int,
    default_subset: str,
    item_id: str,
    stem: str,
    options: dict[str, str],
    gold: str,
    sentences: dict[str, str],
    reading: str,
    raw_question: str | None,
) -> MCQItem | RowIssue:
    """The bundle, subset, language and stored target of a row whose options are read; the item or its issue."""
    injection = None
    content = value(row, "injection_content")
    provenance = value(row, "injection_provenance")
    if sentences or content or provenance:
        labels: dict[str, str | None] = {}
        for name, text, kind, canonical in (
            ("injection_content", content, "content type", taxonomy.canonical_content_type),
            ("injection_provenance", provenance, "provenance", taxonomy.canonical_provenance),
        ):
            try:
                if text is None:
                    raise taxonomy.UnknownLabelError(f"injections present but no {kind}")
                labels[name] = canonical(text)
            except taxonomy.UnknownLabelError as exc:
                if reading != "authors":
                    return issue(name, str(exc))
                labels[name] = None  # the notebook evaluates the row whatever its labels; the strata leave it out
        content_id, provenance_id = labels["injection_content"], labels["injection_provenance"]
        scores: dict[str, float] = {}
        for name in ("difficulty", "mislead_score"):
            text = cell(row, name)
            if text is None:
                continue
            try:
                scores[name] = float(text)
            except ValueError:
                return issue(name, f"{name} {text!r} is not a number")
            if not 0 <= scores[name] <= 10:
                return issue(name, f"{name} {text} is outside 0-10")
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
            reading=reading,
            raw_question=raw_question,
            type1_target=_stored_target(row),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        where = ".".join(str(p) for p in first["loc"]) or ("type1_target" if "Type 1 target" in message else None)
        return issue(where, message)


def _stored_target(row: Row) -> str | None:
    target = cell(row, "type1_target")
    return None if target is None or target in PLACEHOLDERS else target.upper()


def authors_warning(item: MCQItem) -> str | None:
    """Why medrev's own reading would refuse an item the authors' reading loads, or None."""
    if item.injection is not None and (item.injection.content_type is None or item.injection.provenance is None):
        return (
            f"item {item.id!r} has injections without a known content type or provenance; "
            "the notebook evaluates it (left out of the strata)"
        )
    if len(item.options) < 2:
        return f"item {item.id!r} has {len(item.options)} option(s); the notebook evaluates it (never correct)"
    if item.gold not in item.options:
        return (
            f"gold answer {item.gold!r} is not among the options ({', '.join(item.options)}); "
            "the notebook evaluates it (never correct)"
        )
    return None


def load_medmisbench(path: str | Path, *, strict: bool = False, reading: str = "medrev") -> LoadReport:
    """Load items in the released flattened format from a file or a folder of subset files.

    Every row either becomes an item or is reported in ``issues`` with file, line and field.
    With ``strict`` the first problem refuses the whole load (``DatasetError`` listing all of them).
    Duplicate (subset, id) pairs are reported; the first occurrence is kept. ``reading`` chooses
    medrev's checked reading or the authors' (see the module docstring).
    """
    if reading not in READINGS:
        raise ValueError(f"unknown reading {reading!r}; expected one of {', '.join(READINGS)}")
    report = LoadReport()
    seen: dict[tuple[str, str], str] = {}
    for file in tabular_files(Path(path)):
        report.files.append(file)
        default_subset = taxonomy.canonical_subset(file.stem)
        for line, row in iter_rows(file):
            if isinstance(row, RowIssue):
                report.issues.append(row)
                continue
            try:
                result = _row_to_item(row, file=file, line=line, default_subset=default_subset, reading=reading)
            except InputError as exc:  # a list or object where text belongs
                result = exc.as_issue()
            if isinstance(result, RowIssue):
                report.issues.append(result)
                continue
            if reading == "authors" and (warning := authors_warning(result)) is not None:
                field = "injection_content" if "content type" in warning else "answer" if result.options else "opa"
                report.warnings.append(RowIssue(str(file), line, field, warning))
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
