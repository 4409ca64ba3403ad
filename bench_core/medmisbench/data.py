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

One validation for every reader of the format (``bench run`` under either protocol, ``review import``,
the generation tools): every row first passes ``check_cells`` (each cell one plain value, never a list or
an object; label cells plain text, never markup such as ``[b]Cue Remapping[/b]``), and an item is judged
by ``items.item_problems``, the same check ``MCQItem`` applies and ``bench report`` / ``review import``
apply to a run directory's ``items.jsonl``.

Two readings of a row (``reading``):

- ``"medrev"`` (protocol ``strict``): the item is checked (``item_problems``: gold among at least two
  options, sentences only for existing options; the stem stripped), embedded options must run (A), (B),
  (C) ... in order.
- ``"authors"`` (protocol ``authors``): what the authors' notebook (``reconstruct_dicts``) reads
  from the row, so that the prompt is theirs: the stem is kept unstripped, embedded options are
  any ``(LABEL)`` of A-M or digits, the stem before them loses trailing spaces, colons, newlines and
  quotes and each option text its surrounding quotes; a gold answer is a number only when it is all
  digits. Rows the notebook evaluates although ``item_problems`` refuses them (a gold label whose
  option is a placeholder, fewer than two options, labels no spelling matches) load, with a warning
  naming file, line and field.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import Row, cell, iter_rows, tabular_files
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.items import InjectionBundle, ItemProblem, MCQItem, item_problems

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


@dataclass(frozen=True)
class _RowAt:
    """A row being read, where it was read (for its issue) and the subset it belongs to when it names none."""

    row: Row
    file: Path
    line: int
    default_subset: str

    def issue(self, field_name: str | None, message: str) -> RowIssue:
        return RowIssue(str(self.file), self.line, field_name, message)

    def item_id(self) -> str | RowIssue:
        """The row's item id (one read as a float, "12.0", is "12"), or its issue."""
        item_id = cell(self.row, "id")
        if item_id is None:
            return self.issue("id", "missing item id")
        return item_id[:-2] if item_id.endswith(".0") and _INT_LIKE.match(item_id) else item_id


def _row_to_item(
    row: Row, *, file: Path, line: int, default_subset: str, reading: str = "medrev"
) -> MCQItem | RowIssue:
    at = _RowAt(row, file, line, default_subset)
    if reading == "authors":
        return _authors_row_to_item(at)
    issue = at.issue
    item_id = at.item_id()
    if isinstance(item_id, RowIssue):
        return item_id
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
        gold = str(number) if not embedded else (labels[number - 1] if 1 <= number <= len(labels) else answer)
    else:
        gold = answer.upper()

    sentences = {
        label: text
        for label, column in zip(labels, columns, strict=True)
        if (text := value(row, f"inject{column}")) is not None
    }
    for column in OPTION_LETTERS:  # a sentence for an option that does not exist: item_problems names it
        if column not in columns and (text := value(row, f"inject{column}")) is not None:
            sentences[column.upper() if embedded else _column_label(column, numeric)] = text
    return _finish(
        at, item_id, stem, options, gold, sentences=sentences, reading="medrev", raw_question=None, embedded=embedded
    )


def _column_label(column: str, numeric: bool) -> str:
    """The label of option column ``op<column>``: its letter, or its 1-based position with numeric answers."""
    return str(AUTHORS_LETTERS.index(column) + 1) if numeric else column.upper()


def _authors_row_to_item(at: _RowAt) -> MCQItem | RowIssue:
    """The row as the authors' notebook reads it (``reconstruct_dicts``); see the module docstring."""
    row, issue = at.row, at.issue
    item_id = at.item_id()
    if isinstance(item_id, RowIssue):
        return item_id
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
        at,
        item_id,
        stem,
        options,
        answer.upper(),
        sentences=sentences,
        reading="authors",
        raw_question=None if raw_question == stem else raw_question,
    )


def _finish(
    at: _RowAt,
    item_id: str,
    stem: str,
    options: dict[str, str],
    gold: str,
    *,
    sentences: dict[str, str],
    reading: str,
    raw_question: str | None,
    embedded: bool = False,
) -> MCQItem | RowIssue:
    """The bundle, subset, language and stored target of a row whose options are read; the item or its issue.

    Under medrev's reading an item that ``item_problems`` refuses is the row's issue, named by the column at
    fault (``embedded``: the options came from the stem, so an option problem is the question's).
    """
    row, issue = at.row, at.issue
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

    if reading != "authors":
        problems = item_problems(item_id, options, gold, injection)
        if problems:
            return issue(release_column(problems[0], embedded=embedded), problems[0].message)
    subset_name = cell(row, "subset") or at.default_subset
    language = taxonomy.item_language(subset_name, stem, options.values(), cell(row, "language"))
    try:
        return MCQItem(
            id=item_id,
            subset=subset_name,
            language=language,
            question=stem,
            options=options,
            gold=gold,
            injection=injection,
            source_file=at.file.name,
            source_line=at.line,
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


def release_column(problem: ItemProblem, *, embedded: bool = False) -> str:
    """The released-format column an ``ItemProblem`` is about (``answer``, ``opa``, ``injectc`` ...).

    ``embedded``: the options were read from the stem, so a problem with the options is the question's.
    """
    if problem.field == "options":
        return "question" if embedded else "opa"
    if problem.field == "gold":
        return "answer"
    if problem.field == "injection.sentences":
        label = problem.labels[0] if problem.labels else ""
        if len(label) == 1 and label.isalpha():
            return f"inject{label.lower()}"
        if label.isdigit() and 1 <= int(label) <= len(AUTHORS_LETTERS):
            return f"inject{AUTHORS_LETTERS[int(label) - 1]}"
        return "inject"
    return {"injection.content_type": "injection_content", "injection.provenance": "injection_provenance"}.get(
        problem.field, problem.field
    )


def authors_warning(item: MCQItem, *, embedded: bool = False) -> tuple[str, str] | None:
    """(column, message) naming why medrev's own reading would refuse an item the authors' reading loads, or
    None. The reasons are ``item_problems``, the same that refuse the row under ``strict``."""
    problems = item.medrev_problems()
    if not problems:
        return None
    fields = {p.field for p in problems}
    consequences = []
    if fields & {"options", "gold"}:
        consequences.append("never correct")
    if fields & {"injection.content_type", "injection.provenance"}:
        consequences.append("left out of the content and provenance strata")
    if not consequences:
        consequences.append("its sentences delivered as the notebook delivers them")
    message = "; ".join(p.message for p in problems)
    return (
        release_column(problems[0], embedded=embedded),
        f"{message}; medrev's own reading refuses this row, the authors' notebook evaluates it "
        f"({', '.join(consequences)})",
    )


# Cells holding a label: a closed vocabulary (content types, provenances), or short codes (an option label, a
# subset, a language). Neither carries markup: "[b]Cue Remapping[/b]" is not a spelling of a content type, and
# "Cue Remapping[/]" would be accepted as one once the punctuation is folded away.
VOCABULARY_COLUMNS = ("injection_content", "injection_provenance")
CODE_COLUMNS = ("answer", "type1_target", "subset", "language")
_MARKUP = re.compile(r"\[/?[A-Za-z#@][^\[\]]*\]|\[/\]|</?[A-Za-z][^<>]*>|\*\*|`")  # Rich, HTML, Markdown


def check_cells(row: Row, *, file: str | Path, line: int | None) -> list[RowIssue]:
    """Every problem of a row's cells, whatever the reading: the one cell check of the released format.

    Every cell holds one plain value (a list or an object is refused, never read as its Python repr); a label
    cell holds plain text (no markup). ``load_medmisbench`` runs it on every row under both protocols, so
    ``bench run`` (either protocol), ``review import`` and every other reader of the format refuse the same
    rows with the same message naming file, line and field.
    """
    issues: list[RowIssue] = []
    for key in row:
        try:
            text = cell(row, key)
        except InputError as exc:
            issues.append(exc.as_issue())
            continue
        if text is None or text in PLACEHOLDERS:
            continue
        if key in VOCABULARY_COLUMNS:
            problem = taxonomy.label_characters_problem(text)
            if problem is not None:
                issues.append(RowIssue(str(file), line, str(key), problem))
        elif key in CODE_COLUMNS and (found := _MARKUP.search(text)) is not None:
            issues.append(
                RowIssue(
                    str(file), line, str(key), f"{text!r} carries markup ({found.group(0)}); a label is plain text"
                )
            )
    return issues


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
            problems = check_cells(row, file=file, line=line)
            if problems:
                report.issues += problems
                continue
            try:
                result = _row_to_item(row, file=file, line=line, default_subset=default_subset, reading=reading)
            except InputError as exc:  # a cell the reading cannot use (check_cells has refused lists and objects)
                result = exc.as_issue()
            if isinstance(result, RowIssue):
                report.issues.append(result)
                continue
            embedded = not any(value(row, f"op{c}") is not None for c in AUTHORS_LETTERS)
            if reading == "authors" and (warning := authors_warning(result, embedded=embedded)) is not None:
                report.warnings.append(RowIssue(str(file), line, *warning))
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
