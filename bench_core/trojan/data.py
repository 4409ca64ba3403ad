"""Retracted-paper benchmark records: ingest ``standardized_analysis_ccversion.json`` with provenance.

The canonical file (Kaggle dataset "medical-retraction-trojan-test", seed paper section 3.1) is a
JSON array of records ``{id, title, isimpact, conclusion, problem, note}``. The skill's own outputs
wrap the same records in an object (``{"generated_at", "dataset_url", "file_checksum", "records":
[...]}``); both are read. Every record must carry all six fields, non-empty; ``isimpact`` may be
"yes"/"no", a boolean or 0/1 and is normalised to a boolean. A file with any problem is refused
whole and the error lists, per record (``records[i]`` with its id), the fields that are missing or
invalid, plus duplicate ids and a wrong item count when one is expected.

Provenance (the skill's step 1): source URL (given by the caller; the file does not know where it
came from), retrieval time (given, else the wrapper's ``generated_at``, else the file's modification
time, and which of these was used), SHA-256 of the file bytes and the item count. A retrieval time
given or declared must be an ISO 8601 date or date and time (``kernel.dates``); anything else is
refused naming the option, or the file, line and field, before anything is written.

``normalize_records`` is the skill's step 2 fallback: records from other sources (Retraction Watch
exports, OpenAlex/Crossref-like metadata, hand-made lists) mapped into the canonical schema by field
aliases, with the source written into ``note``; a record without a model-facing ``problem``
statement cannot be a benchmark case and is reported, unless the conclusion is explicitly allowed
to stand in for it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from bench_core.kernel.dates import check_iso_date
from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.json_lines import element_lines, member_lines

REQUIRED_FIELDS = ("id", "title", "isimpact", "conclusion", "problem", "note")
TEXT_FIELDS = ("id", "title", "conclusion", "problem", "note")
DEFAULT_SOURCE_URL = (
    "https://www.kaggle.com/datasets/seethelightluo/medical-retraction-trojan-test"
    "?select=standardized_analysis_ccversion.json"
)
_TRUE = {"yes", "y", "true", "1", "high", "impact"}
_FALSE = {"no", "n", "false", "0", "low"}


class RetractedRecord(BaseModel):
    """One benchmark case: a retracted study, the statement put to the model, and the retraction note."""

    model_config = ConfigDict(frozen=True)

    id: str
    title: str
    isimpact: bool
    conclusion: str
    problem: str
    note: str

    def canonical(self) -> dict[str, Any]:
        """The record in the canonical file's spelling (``isimpact`` as "yes"/"no")."""
        row = self.model_dump()
        row["isimpact"] = "yes" if self.isimpact else "no"
        return row


class Provenance(BaseModel):
    """Where a benchmark file came from and which exact bytes were used."""

    model_config = ConfigDict(frozen=True)

    source_url: str | None
    file: str
    sha256: str
    item_count: int
    retrieved_at: str
    retrieved_at_source: str  # "given", "declared" (the wrapper's generated_at) or "file_mtime"
    ingested_at: str
    file_format: str  # "array", "wrapped" or "normalized:<source>"
    declared: dict[str, Any] = {}


@dataclass
class RetractedDataset:
    records: list[RetractedRecord]
    provenance: Provenance
    issues: list[RowIssue] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The skill's step 1 output: provenance fields and the records (canonical spelling)."""
        return {
            "generated_at": self.provenance.ingested_at,
            "dataset_url": self.provenance.source_url,
            "selected_file": Path(self.provenance.file).name,
            "file_checksum": self.provenance.sha256,
            "item_count": len(self.records),
            "provenance": self.provenance.model_dump(),
            "records": [r.canonical() for r in self.records],
        }


def parse_isimpact(value: Any) -> bool | None:
    """ "yes"/"no", True/False, 1/0 (also as text) -> bool; anything else -> None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        folded = value.strip().lower()
        if folded in _TRUE:
            return True
        if folded in _FALSE:
            return False
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value or None


def _declared_date(declared: Mapping[str, Any]) -> Any:
    """The wrapper's ``generated_at`` when it has one, else None. Empty, blank and the skill's example
    placeholder ``"..."`` count as none; anything else is a date to check."""
    value = declared.get("generated_at")
    return None if value is None or (isinstance(value, str) and not value.strip(" .")) else value


def validate_records(
    rows: list[Any], file: str, lines: Sequence[int | None] | None = None
) -> tuple[list[RetractedRecord], list[RowIssue]]:
    """Check every row; the records that passed and one issue per faulty record (naming all its fields).

    ``lines`` gives the file line of each row (``json_lines.element_lines`` for a JSON array, the reader's
    line for JSON Lines and CSV), so each issue names file, line and its first faulty field.
    """
    records: list[RetractedRecord] = []
    issues: list[RowIssue] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        where = f"records[{index}]"
        line = lines[index] if lines is not None and index < len(lines) else None
        if not isinstance(row, Mapping):
            issues.append(RowIssue(file, line, None, f"{where}: not a JSON object"))
            continue
        label = f"{where} (id {row.get('id')!r})" if row.get("id") not in (None, "") else where
        missing = [name for name in REQUIRED_FIELDS if name not in row or row[name] is None or row[name] == ""]
        invalid: list[tuple[str, str]] = []
        for name in TEXT_FIELDS:
            if name not in missing and _text(row[name]) is None:
                invalid.append((name, f"{name} (expected non-empty text, got {type(row[name]).__name__})"))
        if "isimpact" not in missing and parse_isimpact(row["isimpact"]) is None:
            invalid.append(("isimpact", f"isimpact (expected yes/no, true/false or 0/1, got {row['isimpact']!r})"))
        problems = []
        if missing:
            problems.append(f"missing required field(s): {', '.join(missing)}")
        if invalid:
            problems.append(f"invalid: {'; '.join(text for _name, text in invalid)}")
        if problems:
            first = missing[0] if missing else invalid[0][0]
            issues.append(RowIssue(file, line, first, f"{label}: {'; '.join(problems)}"))
            continue
        record = RetractedRecord(
            id=_text(row["id"]) or "",
            title=_text(row["title"]) or "",
            isimpact=bool(parse_isimpact(row["isimpact"])),
            conclusion=_text(row["conclusion"]) or "",
            problem=_text(row["problem"]) or "",
            note=_text(row["note"]) or "",
        )
        if record.id in seen:
            first_at = seen[record.id]
            first_line = lines[first_at] if lines is not None and first_at < len(lines) else None
            also = f"records[{first_at}]" + (f", line {first_line}" if first_line is not None else "")
            issues.append(RowIssue(file, line, "id", f"{label}: duplicate id (also {also})"))
            continue
        seen[record.id] = index
        records.append(record)
    return records, issues


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def load_retracted(
    path: str | Path,
    *,
    source_url: str | None = None,
    retrieved_at: str | None = None,
    expected_count: int | None = None,
    skip_bad_rows: bool = False,
) -> RetractedDataset:
    """Read and validate a benchmark file; DatasetError (listing every problem) when anything is wrong.

    ``skip_bad_rows`` keeps the valid records of a file with faulty ones (listed in the dataset's ``issues``);
    a wrong count or a file with no valid record is still refused.
    """
    from bench_core.kernel.tabular import check_regular_file, read_text_lines

    if retrieved_at is not None:
        retrieved_at = check_iso_date(retrieved_at, field="--retrieved-at")
    path = Path(path)
    check_regular_file(path)  # a folder, a FIFO, a missing file: each its own message
    raw = path.read_bytes()
    text = "".join(read_text_lines(path, max_line=None))  # BOM, NUL, not UTF-8: refused naming the line
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError([RowIssue(str(path), exc.lineno, None, f"not valid JSON ({exc.msg})")]) from exc
    declared: dict[str, Any] = {}
    file_format = "array"
    lines = element_lines(text)
    if isinstance(value, dict) and isinstance(value.get("records"), list):
        declared = {k: v for k, v in value.items() if k != "records" and not isinstance(v, list | dict)}
        value = value["records"]
        file_format = "wrapped"
        lines = element_lines(text, "records")
        if _declared_date(declared) is not None:
            line = member_lines(text).get("generated_at")
            declared["generated_at"] = check_iso_date(
                declared["generated_at"], path=path, line=line, field="generated_at"
            )
    if not isinstance(value, list):
        raise DatasetError(
            [RowIssue(str(path), None, None, "expected a JSON array of records, or an object with a 'records' array")]
        )
    records, issues = validate_records(value, str(path), lines or None)
    fatal = []
    if expected_count is not None and len(value) != expected_count:
        fatal.append(RowIssue(str(path), None, None, f"{len(value)} records, expected {expected_count}"))
    if not records:
        fatal.append(RowIssue(str(path), None, None, "the file holds no record" if not value else "no valid record"))
    if fatal or (issues and not skip_bad_rows):
        raise DatasetError([*issues, *fatal])
    if retrieved_at is not None:
        when, how = retrieved_at, "given"
    elif _declared_date(declared) is not None:
        when, how = declared["generated_at"], "declared"
    else:
        mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
        when, how = mtime.isoformat(timespec="seconds"), "file_mtime"
    provenance = Provenance(
        source_url=source_url or declared.get("dataset_url") or None,
        file=str(path.resolve()),
        sha256=hashlib.sha256(raw).hexdigest(),
        item_count=len(records),
        retrieved_at=when,
        retrieved_at_source=how,
        ingested_at=_now(),
        file_format=file_format,
        declared=declared,
    )
    return RetractedDataset(records, provenance, issues)


# -- fallback normalisation ---------------------------------------------------------------------

FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "case_id", "record_id", "Record ID", "doi", "DOI", "OriginalPaperDOI", "pmid", "PMID"),
    "title": ("title", "Title", "display_name", "ArticleTitle", "paper_title"),
    "isimpact": ("isimpact", "is_impact", "isImpact", "impact", "high_impact"),
    "conclusion": ("conclusion", "Conclusion", "conclusions", "main_finding", "finding", "claim", "abstract"),
    "problem": ("problem", "statement", "test_statement", "problem_statement"),
    "note": ("note", "Note", "retraction_note", "notes", "Notes"),
}
# Retraction Watch export columns that describe the retraction, used to write a note when none is given.
_RETRACTION_PARTS = (
    ("RetractionNature", "Nature"),
    ("RetractionDate", "Date"),
    ("Journal", "Journal"),
    ("Reason", "Reasons"),
    ("RetractionDOI", "Retraction DOI"),
    ("OriginalPaperDOI", "Original DOI"),
)


def _first(row: Mapping[str, Any], names: Iterable[str]) -> Any:
    for name in names:
        value = row.get(name)
        if value is not None and not (isinstance(value, str) and not value.strip()):
            return value
    return None


def normalize_record(
    row: Mapping[str, Any],
    *,
    source: str,
    default_isimpact: bool | None = None,
    problem_from_conclusion: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """Map one foreign record to the canonical fields; returns (record, names of fields still missing)."""
    out: dict[str, Any] = {name: _first(row, aliases) for name, aliases in FIELD_ALIASES.items()}
    if out["note"] is None:
        parts = [f"{label}: {row[key]}" for key, label in _RETRACTION_PARTS if _text(row.get(key))]
        out["note"] = "; ".join(parts) or None
    if out["note"] is not None and f"Source: {source}" not in str(out["note"]):
        out["note"] = f"{str(out['note']).rstrip()} Source: {source}."
    if out["isimpact"] is None and default_isimpact is not None:
        out["isimpact"] = "yes" if default_isimpact else "no"
    elif out["isimpact"] is not None:
        parsed = parse_isimpact(out["isimpact"])
        out["isimpact"] = None if parsed is None else ("yes" if parsed else "no")
    if out["problem"] is None and problem_from_conclusion:
        out["problem"] = out["conclusion"]
    for name in TEXT_FIELDS:
        out[name] = _text(out[name])
    return out, [name for name in REQUIRED_FIELDS if out.get(name) is None]


def normalize_records(
    rows: Iterable[Mapping[str, Any]],
    *,
    source: str,
    file: str = "records",
    default_isimpact: bool | None = None,
    problem_from_conclusion: bool = False,
    lines: Sequence[int | None] | None = None,
) -> tuple[list[RetractedRecord], list[RowIssue]]:
    """Normalise foreign records; the canonical records and one issue per record that cannot be completed.

    ``lines`` gives each row's line in ``file``, so an issue names file, line and field.
    """
    records: list[RetractedRecord] = []
    issues: list[RowIssue] = []
    normalised = []
    for index, row in enumerate(rows):
        line = lines[index] if lines is not None and index < len(lines) else None
        out, missing = normalize_record(
            row, source=source, default_isimpact=default_isimpact, problem_from_conclusion=problem_from_conclusion
        )
        if missing:
            hint = (
                " (problem: the statement put to the model; write one or allow the conclusion)"
                if "problem" in missing
                else ""
            )
            label = f"records[{index}]" + (f" (id {out['id']!r})" if out.get("id") else "")
            issues.append(RowIssue(file, line, missing[0], f"{label}: cannot fill {', '.join(missing)}{hint}"))
            normalised.append(None)
            continue
        normalised.append(out)
    kept = [index for index, row in enumerate(normalised) if row is not None]
    valid, more = validate_records(
        [normalised[index] for index in kept],
        file,
        [lines[index] if lines is not None and index < len(lines) else None for index in kept],
    )
    records.extend(valid)
    issues.extend(more)
    return records, issues


def normalized_dataset(
    path: str | Path,
    *,
    source: str,
    source_url: str | None = None,
    retrieved_at: str | None = None,
    default_isimpact: bool | None = None,
    problem_from_conclusion: bool = False,
) -> RetractedDataset:
    """Read a foreign JSON/JSONL/CSV file and normalise it; refused whole (DatasetError) on any problem."""
    from bench_core.kernel.tabular import check_regular_file, iter_rows, read_text_lines

    if retrieved_at is not None:
        retrieved_at = check_iso_date(retrieved_at, field="--retrieved-at")
    path = Path(path)
    check_regular_file(path)  # a folder, a FIFO, a missing file: each its own message
    raw = path.read_bytes()
    rows: list[Mapping[str, Any]] = []
    lines: list[int | None] = []
    issues: list[RowIssue] = []
    if path.suffix.lower() == ".json":
        text = "".join(read_text_lines(path, max_line=None))  # BOM, NUL, not UTF-8: refused naming the line
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError([RowIssue(str(path), exc.lineno, None, f"not valid JSON ({exc.msg})")]) from exc
        found = element_lines(text)
        if isinstance(value, dict):
            member = next((m for m in ("records", "results", "items") if value.get(m)), None)
            found = element_lines(text, member) if member else [1]
            value = value[member] if member else [value]
        if isinstance(value, list):
            for index, row in enumerate(value):
                if isinstance(row, Mapping):
                    rows.append(row)
                    lines.append(found[index] if index < len(found) else None)
    else:
        for line, row in iter_rows(path):
            if isinstance(row, RowIssue):
                issues.append(row)
            else:
                rows.append(row)
                lines.append(line)
    records, more = normalize_records(
        rows,
        source=source,
        file=str(path),
        default_isimpact=default_isimpact,
        problem_from_conclusion=problem_from_conclusion,
        lines=lines,
    )
    issues += more
    if not rows:
        issues.append(RowIssue(str(path), None, None, "no record found"))
    if issues:
        raise DatasetError(issues)
    mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")
    provenance = Provenance(
        source_url=source_url,
        file=str(path.resolve()),
        sha256=hashlib.sha256(raw).hexdigest(),
        item_count=len(records),
        retrieved_at=retrieved_at or mtime,
        retrieved_at_source="given" if retrieved_at else "file_mtime",
        ingested_at=_now(),
        file_format=f"normalized:{source}",
    )
    return RetractedDataset(records, provenance)
