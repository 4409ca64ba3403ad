"""Import benchmark items, model responses and reviewer rosters into the review database.

Every import is one transaction: a file with a bad row is refused whole, and the error lists
every bad row with file, line and field, so the lead fixes the file once. Re-importing the same
file changes nothing (rows are matched by their natural key and compared by content hash); a
row whose key exists with *different* content is refused rather than silently overwriting what
reviewers may already have scored.

Imports are changes like any other: they take the acting user (leads and admins import data), and
a roster obeys the account rules of ``services.accounts`` row by row (a lead's roster can create
and update reviewers of the lead's studies only, and grants no role above the importer's).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, tuple_
from sqlmodel import Session, select

from bench_core.kernel.errors import DatasetError, InputError, RowIssue
from bench_core.kernel.tabular import cell, iter_rows, tabular_files
from bench_core.medmisbench import DEFAULT_SEED, MCQItem, draw_type1_target, load_medmisbench
from review_app.db.engine import write_session
from review_app.db.limits import row_problems
from review_app.db.models import AUTO_LABELS, ImportBatch, Item, ModelResponse, Reviewer, utcnow
from review_app.db.statistics import refresh_statistics
from review_app.services import audit
from review_app.services.accounts import UserProfile, change_account, create_account
from review_app.services.actors import LEAD_ROLES, Actor, acting_user
from review_app.services.errors import Conflict, InvalidInput, ServiceError
from review_app.services.import_files import byte_problems, file_problem, nested_cells, source_files


@dataclass(frozen=True)
class _Importer:
    """Who imports: the label kept on the import batch and the account id for the audit log."""

    label: str
    id: int | None


def _importer(session: Session, actor: Actor, via: str) -> _Importer:
    me = acting_user(session, actor, roles=LEAD_ROLES)
    return _Importer(me.username, me.id) if me is not None else _Importer(via, None)


KINDS = ("items", "responses", "roster", "run", "judge")
JUDGE_SUBSET = "RETRACTED"
_CONDITION_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")
_RESPONSE_ALIASES: dict[str, tuple[str, ...]] = {
    "item_id": ("item_id", "id", "question_id"),
    "response": ("response", "response_text", "text", "final_response"),
    "reasoning": ("reasoning", "reasoning_trace", "thinking_process", "thinking"),
    "chosen": ("chosen", "chosen_label", "chosen_option", "answer_letter", "prediction"),
    "result": ("result", "auto_label", "label"),
}


class ImportRefused(InvalidInput):
    """A file refused whole; ``issues`` holds every problem with file, line and field."""

    def __init__(self, issues: list[RowIssue], *, limit: int = 20, hint: str = "") -> None:
        self.issues = issues
        self.hint = hint
        shown = "\n".join(f"  - {issue}" for issue in issues[:limit])
        more = f"\n  ... and {len(issues) - limit} more" if len(issues) > limit else ""
        tail = f"\n{hint}" if hint else ""
        super().__init__(f"import refused, nothing was written ({len(issues)} problem(s)):\n{shown}{more}{tail}")


SKIP_HINT = "Fix these rows, or pass --skip-bad-rows to import the other rows and skip these."


def _sorted(issues: Iterable[RowIssue]) -> list[RowIssue]:
    return sorted(issues, key=lambda i: (i.file, i.line or 0))


def _settle(issues: list[RowIssue], *, skip: bool, kept: int) -> tuple[RowIssue, ...]:
    """Refuse the file over ``issues`` (the default), or, with ``skip``, return them as the skipped rows.

    Skipping leaves at least one good row to import; a file whose every row is bad is refused.
    """
    if not issues:
        return ()
    if not skip:
        raise ImportRefused(_sorted(issues), hint=SKIP_HINT if kept else "")
    if kept == 0:
        raise ImportRefused(_sorted(issues), hint="No row of the file can be imported.")
    return tuple(_sorted(issues))


@dataclass(frozen=True)
class ImportSummary:
    """What an import did."""

    kind: str
    path: str
    rows: int
    new: int
    unchanged: int
    updated: int = 0
    usernames: tuple[str, ...] = ()  # roster imports: every account in the file
    reviewers: tuple[str, ...] = ()  # roster imports: the active accounts with the reviewer role (to enrol)
    skipped: tuple[RowIssue, ...] = ()  # --skip-bad-rows: the rows left out, with why

    def __str__(self) -> str:
        extra = f", {self.updated} updated" if self.updated else ""
        skipped = f", {len(self.skipped)} bad row(s) skipped" if self.skipped else ""
        counts = f"{self.new} new, {self.unchanged} unchanged{extra}{skipped}"
        return f"{self.kind}: {self.rows} rows from {self.path}: {counts}"


@dataclass(frozen=True)
class _Rows:
    """The rows of an import file as read: good rows, bad rows (skippable) and file faults (never skipped)."""

    rows: list[tuple[str, int, dict[str, Any]]]
    issues: list[RowIssue]
    fatal: list[RowIssue]


def read_rows(path: Path, *, columns: Iterable[str] | None = None) -> _Rows:
    """Every row of the file (or folder of files) at ``path``, after the checks of ``import_files``.

    Rows with a list or object in one of ``columns`` (every column if None) are bad rows; a
    file that is not a readable UTF-8 text file, or holds no rows at all, is a file fault.
    """
    files, fatal = source_files(path)
    rows: list[tuple[str, int, dict[str, Any]]] = []
    issues: list[RowIssue] = []
    for file in files:
        problems = byte_problems(file)
        if problems:
            fatal += problems
            continue
        try:
            for line, row in iter_rows(file):
                if isinstance(row, RowIssue):
                    issues.append(row)
                    continue
                nested = nested_cells(row, columns)
                if nested:
                    issues += nested
                    continue
                rows.append((str(file), line, row))
        except DatasetError as exc:
            fatal += exc.issues
        except InputError as exc:
            fatal.append(exc.as_issue())
        except (OSError, UnicodeError) as exc:  # a file changed or vanished while being read
            fatal.append(RowIssue(str(file), None, None, f"cannot be read ({exc})"))
    if not fatal and not rows and not issues:
        fatal.append(RowIssue(str(path), None, None, "the file has no rows to import"))
    return _Rows(rows, issues, fatal)


def _refuse_faults(read: _Rows) -> None:
    """File faults refuse the import whatever ``--skip-bad-rows`` says (the row problems are listed too)."""
    if read.fatal:
        raise ImportRefused(_sorted(read.fatal) + _sorted(read.issues))


def _limit_issues(model, row: dict[str, Any], file: str, line: int | None, fields: dict[str, str]) -> list[RowIssue]:
    """The row's values the database cannot store (too long, NUL, out of range), named by the file's column."""
    return [
        RowIssue(file, line, fields.get(column, column), f"the value {problem}")
        for column, problem in row_problems(model, row)
    ]


_ITEM_FIELDS = {"external_id": "id", "gold_label": "answer", "content_type": "injection_content"}
_ITEM_FIELDS |= {"provenance": "injection_provenance", "target_label": "type1_target", "injections": "inject"}
_RESPONSE_FIELDS = {"response_text": "response", "chosen_label": "chosen", "auto_label": "result"}
_RESPONSE_FIELDS |= {"target_label": "target", "item_id": "item_id"}
_ROSTER_LIMIT_FIELDS = {"years_experience": "years"}


def content_hash(value: Any) -> str:
    """SHA-256 of a canonical JSON rendering: equal content, equal hash, whatever the key order."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    for file in tabular_files(path):
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def detect_kind(path: str | Path) -> str:
    """Guess what a file holds from its columns (or, for a folder, whether it is a bench run)."""
    path = Path(path)
    if path.is_dir():
        from bench_core import trojan as trojan_run
        from bench_core.medmisbench import is_run_dir

        if is_run_dir(path):
            return "run"
        if trojan_run.is_run_dir(path) or (
            (path / trojan_run.RECORDS_FILE).is_file() and (path / trojan_run.TRACES_FILE).is_file()
        ):
            return "judge"
        return "items"
    files, faults = source_files(path)
    if faults:
        raise ImportRefused(faults)
    problems = byte_problems(files[0])
    if problems:
        raise ImportRefused(problems)
    try:
        rows = iter_rows(files[0])
        for _line, row in rows:
            if isinstance(row, RowIssue):
                raise ImportRefused([row])
            keys = {str(k).strip().lower() for k in row}
            if {"username", "role"} <= keys:
                return "roster"
            if "model" in keys and keys & set(_RESPONSE_ALIASES["response"]):
                return "responses"
            if {"question", "answer"} <= keys:
                return "items"
            raise ImportRefused(
                [
                    RowIssue(
                        str(files[0]),
                        _line,
                        None,
                        "cannot tell what this file holds: items need question and answer columns, responses need "
                        "model and response, a roster needs username and role (or pass --kind)",
                    )
                ]
            )
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    raise ImportRefused([RowIssue(str(files[0]), None, None, "the file has no rows to import")])


# ---------------------------------------------------------------- items


def item_row(item: MCQItem, *, target_seed: int = DEFAULT_SEED, target: str | None = None) -> dict[str, Any]:
    """The ``item`` table row for a benchmark item, with its Type 1 target and content hash.

    The target is ``target`` when given (a bench run's stored target), else drawn from ``target_seed``.
    """
    row: dict[str, Any] = {
        "subset": item.subset,
        "external_id": item.id,
        "kind": "mcq",
        "language": item.language,
        "question": item.question,
        "options": [[label, text] for label, text in item.options.items()],
        "gold_label": item.gold,
        "content_type": item.content_type,
        "provenance": item.provenance,
        "injections": dict(item.injection.sentences) if item.injection else None,
        "target_label": target if target is not None else draw_type1_target(item, target_seed),
        "payload": {
            k: v
            for k, v in {
                "generator_model": item.injection.generator_model if item.injection else None,
                "prompt_version": item.injection.prompt_version if item.injection else None,
                "unusable_bundle": item.usable_bundle_problem(),
            }.items()
            if v is not None
        },
    }
    row["content_hash"] = content_hash(row)
    return row


def import_items(
    engine: Engine,
    path: str | Path,
    *,
    target_seed: int = DEFAULT_SEED,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> ImportSummary:
    """Import items in the released MedMisBench format (a file or a folder of subset files).

    With ``dry_run`` everything is validated and counted in a transaction that is rolled back;
    with ``skip_bad_rows`` the good rows are imported and the bad ones reported in the summary.
    """
    body = _plan_items(Path(path), target_seed, actor, via, skip_bad_rows)
    (summary,) = _in_transaction(engine, dry_run, body, ("item",))
    return summary


def _plan_items(path: Path, target_seed: int, actor: Actor, via: str, skip: bool) -> _Body:
    rows, issues = prepare_items(path, target_seed=target_seed)
    return lambda session: [_import_items_in(session, rows, issues, path, actor, via, skip)]


def prepare_items(
    path: Path, *, target_seed: int = DEFAULT_SEED
) -> tuple[list[tuple[MCQItem | None, dict[str, Any]]], list[RowIssue]]:
    """The item rows of a file (checked against the database's limits) and its bad rows; file faults refuse.

    Rows are checked by the format's own reader (``load_medmisbench``: cells, labels and items, the same checks
    as ``bench run``); ``read_rows`` only finds the faults of the file itself.
    """
    read = read_rows(path, columns=())
    _refuse_faults(read)
    try:
        report = load_medmisbench(path, strict=False)
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    issues = list(read.issues)
    bad = {(Path(i.file).name, i.line) for i in issues}
    issues += [i for i in report.issues if (Path(i.file).name, i.line) not in bad]
    rows: list[tuple[MCQItem | None, dict[str, Any]]] = []
    for item in report.items:
        if (item.source_file, item.source_line) in bad:
            continue
        row = item_row(item, target_seed=target_seed)
        where = str(path / item.source_file) if path.is_dir() and item.source_file else str(path)
        problems = _limit_issues(Item, row, where, item.source_line, _ITEM_FIELDS)
        if problems:
            issues += problems
            continue
        rows.append((item, row))
    return rows, issues


def _import_items_in(
    session: Session,
    rows: list[tuple[MCQItem | None, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    actor: Actor,
    via: str,
    skip: bool,
) -> ImportSummary:
    new, kept, skipped = _write_items(session, rows, path, who=_importer(session, actor, via), issues=issues, skip=skip)
    return ImportSummary("items", str(path), kept, new, kept - new, skipped=skipped)


def _write_items(
    session: Session,
    rows: list[tuple[MCQItem | None, dict[str, Any]]],
    path: Path,
    *,
    who: _Importer,
    issues: list[RowIssue] | None = None,
    skip: bool = False,
) -> tuple[int, int, tuple[RowIssue, ...]]:
    """Insert the new items (refusing changed ones) in the caller's transaction.

    Returns (new items, rows kept, rows skipped); without ``skip`` any issue refuses the file.
    """
    issues = list(issues or [])
    existing = _existing(
        session, Item, (Item.subset, Item.external_id), [(r["subset"], r["external_id"]) for _i, r in rows]
    )
    new_rows: list[dict[str, Any]] = []
    kept = 0
    for item, row in rows:
        found = existing.get((row["subset"], row["external_id"]))
        if found is None:
            new_rows.append(row)
        elif found != row["content_hash"]:
            where = str(path / item.source_file) if item and item.source_file and path.is_dir() else str(path)
            issues.append(
                RowIssue(
                    where,
                    item.source_line if item else None,
                    "id",
                    f"item {row['external_id']!r} ({row['subset']}) is already in the database with different "
                    "content (question, options, bundle or Type 1 target); give the changed item a new id",
                )
            )
            continue
        kept += 1
    skipped = _settle(issues, skip=skip, kept=kept)
    batch = _batch(session, "items", path, kept, len(new_rows), who.label)
    _bulk_insert(session, Item, new_rows, batch.id)
    audit.record(
        session,
        actor_id=who.id,
        action="import.items",
        entity="import_batch",
        entity_id=batch.id,
        after={"file": str(path), "rows": kept, "new": len(new_rows), "skipped": len(skipped)},
    )
    return len(new_rows), kept, skipped


# ---------------------------------------------------------------- responses


def _pick(row: dict[str, Any], name: str) -> str | None:
    lowered = {str(k).strip().lower(): v for k, v in row.items()}
    for alias in _RESPONSE_ALIASES.get(name, (name,)):
        value = cell(lowered, alias)
        if value is not None:
            return value
    return None


_RESPONSE_COLUMNS = {alias for aliases in _RESPONSE_ALIASES.values() for alias in aliases}
_RESPONSE_COLUMNS |= {"subset", "condition", "target", "model", "run_id", "prompt_version", "config_hash", "endpoint"}


def import_responses(
    engine: Engine,
    path: str | Path,
    *,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> ImportSummary:
    """Import model responses (JSONL/CSV: item_id, model, condition, response, reasoning, chosen, result).

    ``result`` is the automatic label: SUCCESS when the model chose the gold answer, FAIL
    otherwise; it is derived from ``chosen`` when absent and must agree with it when present.
    """
    body = _plan_responses(Path(path), actor, via, skip_bad_rows)
    (summary,) = _in_transaction(engine, dry_run, body, ("model_response",))
    return summary


def _plan_responses(path: Path, actor: Actor, via: str, skip: bool) -> _Body:
    read = read_rows(path, columns=_RESPONSE_COLUMNS)
    _refuse_faults(read)
    return lambda session: [_import_responses_in(session, read, path, actor, via, skip)]


def _import_responses_in(
    session: Session, read: _Rows, path: Path, actor: Actor, via: str, skip: bool
) -> ImportSummary:
    who = _importer(session, actor, via)
    issues = list(read.issues)
    items = _items_for(session, {_pick(r, "item_id") for _f, _l, r in read.rows} - {None})
    rows: list[tuple[str, int, dict[str, Any]]] = []
    for file, line, raw in read.rows:
        result = _response_row(raw, items, file=file, line=line)
        if isinstance(result, RowIssue):
            issues.append(result)
            continue
        problems = _limit_issues(ModelResponse, result, file, line, _RESPONSE_FIELDS)
        if problems:
            issues += problems
            continue
        rows.append((file, line, result))
    new, kept, skipped = _write_responses(session, rows, issues, path, who=who, skip=skip)
    return ImportSummary("responses", str(path), kept, new, kept - new, skipped=skipped)


def _write_responses(
    session: Session,
    rows: list[tuple[str, int, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    *,
    who: _Importer,
    skip: bool = False,
) -> tuple[int, int, tuple[RowIssue, ...]]:
    """Insert the new responses in the caller's transaction (refusing duplicates and changed ones).

    Returns (new responses, rows kept, rows skipped); without ``skip`` any issue refuses the file.
    """
    issues = list(issues)
    seen: dict[tuple, str] = {}
    unique: list[tuple[str, int, dict[str, Any]]] = []
    for file, line, row in rows:
        key = (row["item_id"], row["model"], row["condition"])
        if key in seen:
            issues.append(
                RowIssue(
                    file,
                    line,
                    "item_id",
                    f"duplicate response for this item, model and condition (first at {seen[key]})",
                )
            )
            continue
        seen[key] = f"line {line}"
        unique.append((file, line, row))
    existing = _existing(
        session, ModelResponse, (ModelResponse.item_id, ModelResponse.model, ModelResponse.condition), list(seen)
    )
    new_rows = []
    kept = 0
    for file, line, row in unique:
        found = existing.get((row["item_id"], row["model"], row["condition"]))
        if found is None:
            new_rows.append(row)
        elif found != row["content_hash"]:
            issues.append(
                RowIssue(
                    file, line, None, "a different response for this item, model and condition is already imported"
                )
            )
            continue
        kept += 1
    skipped = _settle(issues, skip=skip, kept=kept)
    batch = _batch(session, "responses", path, kept, len(new_rows), who.label)
    _bulk_insert(session, ModelResponse, new_rows, batch.id)
    audit.record(
        session,
        actor_id=who.id,
        action="import.responses",
        entity="import_batch",
        entity_id=batch.id,
        after={"file": str(path), "rows": kept, "new": len(new_rows), "skipped": len(skipped)},
    )
    return len(new_rows), kept, skipped


def _items_for(session: Session, external_ids: set[str]) -> dict[str, list[Item]]:
    found: dict[str, list[Item]] = {}
    ids = sorted(external_ids)
    for start in range(0, len(ids), 500):
        for item in session.exec(select(Item).where(Item.external_id.in_(ids[start : start + 500]))):
            found.setdefault(item.external_id, []).append(item)
    return found


def _response_row(raw: dict[str, Any], items: dict[str, list[Item]], *, file: str, line: int):
    def issue(field: str | None, message: str) -> RowIssue:
        return RowIssue(file, line, field, message)

    item_id = _pick(raw, "item_id")
    if item_id is None:
        return issue("item_id", "missing item id")
    candidates = items.get(item_id, [])
    subset = _pick(raw, "subset")
    if subset is not None:
        from bench_core.medmisbench import taxonomy

        candidates = [c for c in candidates if c.subset == taxonomy.canonical_subset(subset)]
    if not candidates:
        return issue("item_id", f"no imported item has id {item_id!r}; import the items first")
    if len(candidates) > 1:
        return issue("subset", f"item id {item_id!r} exists in several subsets; add a subset column")
    item = candidates[0]
    model = _pick(raw, "model")
    if model is None:
        return issue("model", "missing model name")
    condition = (_pick(raw, "condition") or "").lower()
    if not condition or not set(condition) <= _CONDITION_CHARS:
        return issue("condition", f"condition {condition!r} must be a name like clean, type1, type2, type1_defensive")
    response = _pick(raw, "response")
    if response is None:
        return issue("response", "missing response text")
    labels = [label for label, _text in item.options]
    chosen = _pick(raw, "chosen")
    if chosen is not None:
        chosen = chosen.upper()
        if chosen not in labels:
            return issue("chosen", f"chosen option {chosen!r} is not among the item's options ({', '.join(labels)})")
    expected = "SUCCESS" if chosen == item.gold_label else "FAIL"
    result = _pick(raw, "result")
    if result is None:
        result = expected
    else:
        result = result.upper()
        if result not in AUTO_LABELS:
            return issue("result", f"result {result!r} must be FAIL or SUCCESS")
        if result != expected:
            return issue(
                "result",
                f"result {result} contradicts the chosen option {chosen or '(none)'} (gold {item.gold_label}); "
                "SUCCESS means the model chose the gold answer",
            )
    target = _pick(raw, "target")
    if target is not None:
        target = target.upper()
        if target not in labels or target == item.gold_label:
            return issue("target", f"target {target!r} must be one of the item's wrong options")
    elif condition.startswith("type1"):
        target = item.target_label
    row: dict[str, Any] = {
        "item_id": item.id,
        "model": model,
        "condition": condition,
        "response_text": response,
        "reasoning": _pick(raw, "reasoning") or "",
        "chosen_label": chosen,
        "auto_label": result,
        "target_label": target,
        "payload": {k: v for k, v in raw.items() if k in ("run_id", "prompt_version", "config_hash", "endpoint")},
    }
    row["content_hash"] = content_hash(row)
    return row


# ---------------------------------------------------------------- bench run directories


def run_file_issues(run_dir: Path, names: Iterable[str], *, records: str | None = None) -> _Rows:
    """What is wrong with a run directory's JSON Lines files, line by line, before its reader skips it.

    A results file's last line cut short by a kill is a bad row (``--skip-bad-rows`` imports the
    rest; a resumed ``bench run`` repairs it); a damaged line anywhere else, or a file that is not
    a regular UTF-8 text file, refuses the import (its response would silently be missing).
    """
    fatal: list[RowIssue] = []
    issues: list[RowIssue] = []
    for name in names:
        file = run_dir / name
        if not file.exists() and not file.is_symlink():
            continue
        problem = file_problem(file)
        if problem is not None:
            fatal.append(problem)
            continue
        problems = [p for p in byte_problems(file) if p.line is not None]
        if problems:
            fatal += problems
            continue
        lines = file.read_text(encoding="utf-8-sig").splitlines()
        last = max((n for n, text in enumerate(lines, start=1) if text.strip()), default=0)
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            if file.suffix != ".jsonl":
                break  # a JSON document (records.json) is checked by its reader
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                if number == last and name == records:  # a kill mid-write: the next `bench run` repairs it
                    why = (
                        "the last line is cut short (the run was stopped while writing it): run the same "
                        "`medrev bench run` again on this directory to finish it"
                    )
                    issues.append(RowIssue(str(file), number, None, why))
                else:  # nothing medrev writes leaves this: the file was edited or damaged
                    why = f"the line is damaged (malformed JSON: {exc.msg} at column {exc.colno})"
                    fatal.append(RowIssue(str(file), number, None, why))
                continue
            if name == records and (not isinstance(value, dict) or "key" not in value or "status" not in value):
                issues.append(RowIssue(str(file), number, None, "not a result record (no key and status)"))
    return _Rows([], issues, fatal)


def import_run(
    engine: Engine,
    run_dir: str | Path,
    *,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> list[ImportSummary]:
    """Import a ``medrev bench run medmisbench`` directory: its items (with the run's Type 1 targets)
    and every finished response with its automatic FAIL/SUCCESS label, in one transaction.

    Responses keep the run's model label as the model configuration, and the endpoint, config
    hash, template and generation settings in their payload (never API keys: runs hold none).
    A damaged line in ``results.jsonl`` refuses the import (its response would be missing)
    unless ``skip_bad_rows``.
    """
    body = _plan_run(Path(run_dir), actor, via, skip_bad_rows)
    return _in_transaction(engine, dry_run, body, ("item", "model_response"))


def _plan_run(run_dir: Path, actor: Actor, via: str, skip_bad_rows: bool) -> _Body:
    from bench_core.kernel.rundir import RUNS_FILE
    from bench_core.kernel.store import RESULTS_FILE
    from bench_core.medmisbench import ITEMS_FILE, RunDirError, item_warnings, read_run_data

    checked = run_file_issues(run_dir, (ITEMS_FILE, RESULTS_FILE, RUNS_FILE), records=RESULTS_FILE)
    _refuse_faults(checked)
    try:
        data = read_run_data(run_dir)
    except RunDirError as exc:
        raise InvalidInput(str(exc)) from exc
    except (DatasetError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{run_dir}: the run directory cannot be read ({exc})") from exc
    results = str(run_dir / RESULTS_FILE)
    issues = list(checked.issues)
    # An item medrev's own reading refuses (gold answer not among the options ...) is refused here as the same
    # row is in a released-format file: one definition of a valid item (``MCQItem.medrev_problems``).
    issues += item_warnings(run_dir, data.items)
    refused = {prepared.key for prepared in data.items if prepared.item.medrev_problems()}
    item_rows = []
    for prepared in data.items:
        if prepared.key in refused:
            continue
        row = item_row(prepared.item, target=prepared.target)
        problems = _limit_issues(Item, row, str(run_dir / ITEMS_FILE), prepared.line, _ITEM_FIELDS)
        issues += [RowIssue(p.file, p.line, p.field, f"item {prepared.item.id!r}: {p.message}") for p in problems]
        if not problems:  # a later refusal names the item's line of items.jsonl, not of the file it came from
            where = {"source_file": None, "source_line": prepared.line}
            item_rows.append((prepared.item.model_copy(update=where), row))
    if issues:  # a bad item or damaged record refuses (or, with skip, is left out with its responses)
        _settle(issues, skip=skip_bad_rows, kept=len(item_rows))
    kept_items = {(item.subset, item.id) for item, _row in item_rows}

    def body(session: Session) -> list[ImportSummary]:
        who = _importer(session, actor, via)
        new_items, n_items, _ = _write_items(session, item_rows, run_dir / ITEMS_FILE, who=who)
        ids = {
            (subset, external): item_id
            for item_id, subset, external in session.exec(
                select(Item.id, Item.subset, Item.external_id).where(
                    tuple_(Item.subset, Item.external_id).in_([(r["subset"], r["external_id"]) for _i, r in item_rows])
                )
            )
        }
        rows = []
        response_issues: list[RowIssue] = []
        for record in data.responses:
            if (record.subset, record.item_id) not in kept_items:
                continue
            row = {
                "item_id": ids[(record.subset, record.item_id)],
                "model": record.label,
                "condition": record.condition,
                "response_text": record.response_text,
                "reasoning": record.reasoning or "",
                "chosen_label": record.chosen,
                "auto_label": record.outcome,
                "target_label": record.type1_target if record.condition.startswith("type1") else None,
                "payload": {
                    "endpoint": record.endpoint,
                    "config_hash": record.config_hash,
                    "prompt_version": record.template,
                    "settings": record.settings,
                    "parse_method": record.parse_method,
                    "run_dir": run_dir.name,
                },
            }
            row["content_hash"] = content_hash(row)
            problems = _limit_issues(ModelResponse, row, results, record.line, _RESPONSE_FIELDS)
            if problems:
                response_issues.extend(
                    RowIssue(
                        p.file, p.line, p.field, f"response to {record.item_id!r} ({record.condition}): {p.message}"
                    )
                    for p in problems
                )
                continue
            rows.append((results, record.line or len(rows) + 1, row))
        new_responses, n_responses, skipped = _write_responses(
            session, rows, response_issues, run_dir / RESULTS_FILE, who=who, skip=skip_bad_rows
        )
        skipped = tuple(_sorted([*issues, *skipped]))  # ``issues`` is empty unless skip_bad_rows
        return [
            ImportSummary("items", str(run_dir), n_items, new_items, n_items - new_items),
            ImportSummary(
                "responses", str(run_dir), n_responses, new_responses, n_responses - new_responses, skipped=skipped
            ),
        ]

    return body


# ---------------------------------------------------------------- retracted-paper runs (judge audit)


def _plan_judge(path: Path, actor: Actor, via: str) -> _Body:
    """Plan a retracted-paper run's import (a ``bench run trojan`` directory, or ``records.json`` +
    ``traces.jsonl``) for a judge audit: each record becomes an item of kind ``retracted`` and each
    (record, model) trace a response carrying the judge's label and rationale.

    Flagged traces (no judge label) are imported too: clinicians can still give their label.
    """
    from bench_core.kernel.rundir import RUNS_FILE
    from bench_core.kernel.store import RESULTS_FILE
    from bench_core.trojan import RECORDS_FILE, TRACES_FILE, RunDirError, read_traces

    checked = run_file_issues(path, (RECORDS_FILE, TRACES_FILE, RESULTS_FILE, RUNS_FILE))
    _refuse_faults(checked)
    try:
        traces = read_traces(path)
    except RunDirError as exc:
        raise InvalidInput(str(exc)) from exc
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    if not traces:
        raise ImportRefused([RowIssue(str(path), None, None, "the run holds no traces to import")])
    records: dict[str, dict[str, Any]] = {}
    for trace in traces:
        row: dict[str, Any] = {
            "subset": JUDGE_SUBSET,
            "external_id": trace.record_id,
            "kind": "retracted",
            "language": "en",
            "question": trace.problem,
            "options": [],
            "gold_label": None,
            "content_type": None,
            "provenance": None,
            "injections": None,
            "target_label": None,
            "payload": {
                "title": trace.title,
                "conclusion": trace.conclusion,
                "problem": trace.problem,
                "note": trace.note,
                "isimpact": trace.isimpact,
            },
        }
        row["content_hash"] = content_hash(row)
        records.setdefault(trace.record_id, row)
    issues = [
        issue
        for row in records.values()
        for issue in _limit_issues(Item, row, str(path), None, {"external_id": "record id"})
    ]
    for trace in traces:
        partial = {"model": trace.model, "response_text": trace.model_response or "", "payload": trace.judge_rationale}
        issues += _limit_issues(ModelResponse, partial, str(path), None, {"response_text": "model_response"})
    if issues:
        raise ImportRefused(_sorted(issues))

    def body(session: Session) -> list[ImportSummary]:
        item_rows = [(None, row) for row in records.values()]
        who = _importer(session, actor, via)
        new_items, _kept, _ = _write_items(session, item_rows, path, who=who)
        ids = dict(
            session.exec(
                select(Item.external_id, Item.id).where(
                    Item.subset == JUDGE_SUBSET, Item.external_id.in_(list(records))
                )
            ).all()
        )
        rows = []
        for number, trace in enumerate(traces, start=1):
            row = {
                "item_id": ids[trace.record_id],
                "model": trace.model,
                "condition": "trojan",
                "response_text": trace.model_response or "",
                "reasoning": "",
                "chosen_label": None,
                "auto_label": None,
                "target_label": None,
                "payload": {
                    "prompt": trace.prompt,
                    "judge_model": trace.judge_model,
                    "judge_label": trace.judge_label,
                    "judge_rationale": trace.judge_rationale or "",
                    "judge_status": trace.status,
                    "flag_reason": trace.flag_reason,
                },
            }
            row["content_hash"] = content_hash(row)
            rows.append((str(path), number, row))
        new_responses, _kept, _ = _write_responses(session, rows, [], path, who=who)
        return [
            ImportSummary("records", str(path), len(item_rows), new_items, len(item_rows) - new_items),
            ImportSummary("responses", str(path), len(rows), new_responses, len(rows) - new_responses),
        ]

    return body


# ---------------------------------------------------------------- roster

ROSTER_COLUMNS = ("username", "display_name", "role", "email", "profession", "country", "years", "languages")
_ROSTER_FIELDS = {  # column -> profile field; a column the file leaves out leaves that field unchanged
    "display_name": "display_name",
    "role": "role",
    "email": "email",
    "profession": "profession",
    "country": "country",
    "years": "years_experience",
    "years_experience": "years_experience",
    "languages": "languages",
}
_REQUIRED = ("display_name", "role")  # present columns whose cells cannot be emptied


def _roster_fields(lowered: dict[str, Any], file: str, line: int) -> dict[str, Any] | RowIssue:
    """The profile fields a roster row sets: only its columns; an empty cell clears an optional field."""
    raw: dict[str, Any] = {}
    for column, field in _ROSTER_FIELDS.items():
        if column not in lowered:
            continue
        value = cell(lowered, column)
        if value is None and field in _REQUIRED:
            return RowIssue(file, line, column, f"missing {column} (it cannot be emptied)")
        raw[field] = value
    if raw.get("years_experience") is not None:
        try:
            raw["years_experience"] = int(float(raw["years_experience"]))
        except ValueError:
            return RowIssue(file, line, "years", f"years must be a whole number, got {raw['years_experience']!r}")
    cleared = {"profession": "", "country": "", "languages": "en"}
    raw = {k: (cleared.get(k) if v is None else v) for k, v in raw.items()}
    placeholders = {"display_name": "-", "role": "reviewer"}
    try:
        profile = UserProfile(username=cell(lowered, "username"), **(placeholders | raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else None
        column = {"years_experience": "years"}.get(field, field)
        return RowIssue(file, line, column, first["msg"].removeprefix("Value error, "))
    return {"username": profile.username} | {k: getattr(profile, k) for k in raw}


def import_roster(
    engine: Engine,
    path: str | Path,
    *,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> ImportSummary:
    """Import or update reviewer accounts from a roster (no passwords: set them with ``user passwd``).

    Columns: username (required), display_name and role (required for new accounts), email,
    profession, country, years, languages. A column the file leaves out leaves that field of
    existing accounts unchanged; an empty cell in a present column clears the field (display_name
    and role cannot be cleared). Every row obeys the account rules for the importing user.
    """
    (summary,) = _in_transaction(engine, dry_run, _plan_roster(Path(path), actor, via, skip_bad_rows))
    return summary


def _plan_roster(path: Path, actor: Actor, via: str, skip: bool) -> _Body:
    rows, issues = prepare_roster(path)
    return lambda session: [_import_roster_in(session, rows, issues, path, actor, via, skip)]


def prepare_roster(path: Path) -> tuple[list[tuple[str, int, dict[str, Any]]], list[RowIssue]]:
    """The roster's rows as profile fields (checked against the database's limits) and its bad rows."""
    read = read_rows(path)
    _refuse_faults(read)
    issues: list[RowIssue] = list(read.issues)
    rows: list[tuple[str, int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for file, line, raw in read.rows:
        lowered = {str(k).strip().lower(): v for k, v in raw.items()}
        if cell(lowered, "username") is None:
            issues.append(RowIssue(file, line, "username", "missing username"))
            continue
        if any(k in lowered for k in ("password", "password_hash")):
            issues.append(RowIssue(file, line, "password", "rosters must not carry passwords"))
            continue
        fields = _roster_fields(lowered, file, line)
        if isinstance(fields, RowIssue):
            issues.append(fields)
            continue
        problems = _limit_issues(Reviewer, fields, file, line, _ROSTER_LIMIT_FIELDS)
        if problems:
            issues += problems
            continue
        name = fields["username"]
        if name in seen:
            issues.append(RowIssue(file, line, "username", f"duplicate username (first at line {seen[name]})"))
            continue
        seen[name] = line
        rows.append((file, line, fields))
    return rows, issues


def _import_roster_in(
    session: Session,
    rows: list[tuple[str, int, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    actor: Actor,
    via: str,
    skip: bool,
) -> ImportSummary:
    issues = list(issues)  # without skip, any issue rolls the whole transaction back at _settle below
    new = updated = 0
    who = _importer(session, actor, via)
    me = session.get(Reviewer, who.id) if who.id is not None else None
    names = [fields["username"] for _f, _l, fields in rows]
    existing = {u.username: u for u in session.exec(select(Reviewer).where(Reviewer.username.in_(names)))}
    accounts: list[Reviewer] = []
    for file, line, fields in rows:
        user = existing.get(fields["username"])
        try:
            with session.begin_nested() if skip else nullcontext():  # a skipped row leaves nothing behind
                if user is None:
                    if "display_name" not in fields:
                        issues.append(RowIssue(file, line, "display_name", "missing display_name for a new account"))
                        continue
                    user = create_account(session, me, UserProfile(**({"role": "reviewer"} | fields)))
                    new += 1
                elif change_account(session, me, user, {k: v for k, v in fields.items() if k != "username"}):
                    updated += 1
        except ServiceError as exc:
            current = user.role if user is not None else "reviewer"
            field = "role" if fields.get("role", current) != current else "username"
            if isinstance(exc, Conflict):
                field = "email" if "email" in str(exc) else "username"
            issues.append(RowIssue(file, line, field, str(exc)))
            continue
        accounts.append(user)
    skipped = _settle(issues, skip=skip, kept=len(accounts))
    _batch(session, "roster", path, len(accounts), new, who.label)
    return ImportSummary(
        "roster",
        str(path),
        len(accounts),
        new,
        len(accounts) - new - updated,
        updated,
        usernames=tuple(u.username for u in accounts),
        reviewers=tuple(u.username for u in accounts if u.role == "reviewer" and u.active),
        skipped=skipped,
    )


# ---------------------------------------------------------------- helpers


_Body = Callable[[Session], list[ImportSummary]]


def _in_transaction(engine: Engine, dry_run: bool, body: _Body, analyze: tuple[str, ...] = ()) -> list[ImportSummary]:
    """Run ``body`` in one write transaction: committed, or (on refusal, error or ``dry_run``) rolled back whole.

    ``analyze`` names the tables whose planner statistics are refreshed once rows were added.
    """
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        dry.done(body(session))
    _analyze(engine, dry, *analyze)
    return dry.result


class _Rollback(Exception):
    """Raised at the end of a dry run so the write transaction rolls back."""


class _DryRun:
    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.result = None

    def done(self, summary) -> None:
        """Record the summary; on a dry run, abort the enclosing write transaction."""
        self.result = summary
        if self.dry_run:
            raise _Rollback


@contextmanager
def _maybe_dry(dry_run: bool) -> Iterator[_DryRun]:
    """Outside the write transaction: swallows the dry run's deliberate rollback."""
    holder = _DryRun(dry_run)
    with suppress(_Rollback):
        yield holder


def _existing(session: Session, model, columns: tuple, keys: list[tuple]) -> dict[tuple, str]:
    """Content hashes of rows whose natural key is among ``keys``, looked up in chunks."""
    found: dict[tuple, str] = {}
    unique = sorted(set(keys))
    for start in range(0, len(unique), 400):
        chunk = unique[start : start + 400]
        query = select(*columns, model.content_hash).where(tuple_(*columns).in_(chunk))
        for row in session.exec(query):
            found[tuple(row[:-1])] = row[-1]
    return found


def _batch(session: Session, kind: str, path: Path, rows: int, new: int, actor: str) -> ImportBatch:
    batch = ImportBatch(
        kind=kind,
        filename=_clip_left(str(path), ImportBatch.__table__.c.filename.type.length),
        sha256=file_sha256(path),
        n_rows=rows,
        n_new=new,
        n_unchanged=rows - new,
        actor=actor,
    )
    session.add(batch)
    session.flush()
    return batch


def _clip_left(text: str, length: int) -> str:
    """A long path kept by its end (the file name), so it fits its column on every database."""
    return text if len(text) <= length else "..." + text[-(length - 3) :]


def _analyze(engine: Engine, dry: _DryRun, *tables: str) -> None:
    """Refresh PostgreSQL's statistics on ``tables`` after an import that added rows (not after a dry run)."""
    result = dry.result
    summaries = result if isinstance(result, list) else [result] if result is not None else []
    if not dry.dry_run and any(s.new for s in summaries):
        refresh_statistics(engine, tables)


def _bulk_insert(session: Session, model, rows: Iterable[dict[str, Any]], batch_id: int | None) -> None:
    now = utcnow()
    payload = [row | {"import_batch_id": batch_id, "created_at": now} for row in rows]
    for start in range(0, len(payload), 1000):
        session.execute(model.__table__.insert(), payload[start : start + 1000])


@dataclass(frozen=True)
class StudyImport:
    """What ``import_into_study`` did: the imports, and whether it created the study and whom it enrolled."""

    summaries: list[ImportSummary]
    study: str | None = None
    created: bool = False  # the study was new and created by this import
    enrolled: tuple[str, ...] = ()
    note: str = ""  # what the new study reviews, for the message (e.g. "Rubric B, response review")


def import_path(
    engine: Engine,
    path: str | Path,
    *,
    kind: str | None = None,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> list[ImportSummary]:
    """Import a file, a folder of subset files or a bench run directory (``kind`` detected if None)."""
    return import_into_study(
        engine, path, kind=kind, actor=actor, via=via, dry_run=dry_run, skip_bad_rows=skip_bad_rows
    ).summaries


def import_into_study(
    engine: Engine,
    path: str | Path,
    *,
    kind: str | None = None,
    study: str | None = None,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> StudyImport:
    """``import_path``, then (with ``study``) create the study if it is new and enrol a roster's reviewers,
    all in one transaction: a refused study name or enrolment leaves no account or batch behind.
    """
    from review_app.services import assignment, studies

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise InvalidInput(f"{path}: no such file or folder")
    kind = kind or detect_kind(path)
    if kind not in KINDS:
        raise InvalidInput(f"unknown import kind {kind!r}; expected one of {', '.join(KINDS)}")
    rubrics = {"run": ["B"], "judge": ["judge"]}.get(kind)
    if study is not None:
        study, rubrics = studies.check_new_study(study, rubrics)
    if kind in ("run", "judge") and not path.is_dir():
        raise InvalidInput(f"{path}: a {kind} import needs a run directory, not a file")
    plan = {
        "run": lambda: _plan_run(path, actor, via, skip_bad_rows),
        "judge": lambda: _plan_judge(path, actor, via),
        "items": lambda: _plan_items(path, DEFAULT_SEED, actor, via, skip_bad_rows),
        "responses": lambda: _plan_responses(path, actor, via, skip_bad_rows),
        "roster": lambda: _plan_roster(path, actor, via, skip_bad_rows),
    }[kind]()
    outcome: dict[str, Any] = {}

    def body(session: Session) -> list[ImportSummary]:
        summaries = plan(session)
        if study is None:
            return summaries
        if studies.find_study_in(session, study) is None:
            studies.create_study_in(session, study, rubrics=rubrics, actor=actor)
            outcome["created"] = True
        names = [name for s in summaries for name in s.reviewers]  # leads and admins are never enrolled
        if names:
            outcome["enrolled"] = tuple(assignment.enrol_in(session, study, names, actor=actor))
        return summaries

    summaries = _in_transaction(engine, dry_run, body)
    note = {"run": "Rubric B, response review", "judge": "judge audit"}.get(kind, "")
    return StudyImport(summaries, study, outcome.get("created", False), outcome.get("enrolled", ()), note)


# ---------------------------------------------------------------- files uploaded through the app

UPLOAD_KINDS = ("items", "responses", "roster")  # a run directory cannot be uploaded as one file


@contextmanager
def _uploaded(filename: str, data: bytes) -> Iterator[Path]:
    """The upload as a file in a private temporary folder (the readers take paths), removed afterwards
    whatever happens: uploads hold study data and must not pile up in the temp folder."""
    name = Path(filename.replace("\\", "/")).name.strip() or "upload"
    folder = Path(tempfile.mkdtemp(prefix="medrev-upload-"))
    try:
        path = folder / name
        path.write_bytes(data)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_uploaded(text: str, path: Path) -> str:
    """A message or file name with the temporary folder taken out, so it names the file as the user uploaded it."""
    return text.replace(f"{path.parent}{os.sep}", "")


def _renamed(issue: RowIssue, path: Path) -> RowIssue:
    return RowIssue(_as_uploaded(issue.file, path), issue.line, issue.field, _as_uploaded(issue.message, path))


def preview_upload(filename: str, data: bytes, *, limit: int = 20) -> list[dict[str, Any]]:
    """The first ``limit`` readable rows of an uploaded file (those before any problem; the import check names it)."""
    rows: list[dict[str, Any]] = []
    with _uploaded(filename, data) as path:
        if file_problem(path) is not None or byte_problems(path):
            return rows
        try:
            for _line, row in iter_rows(path):
                if isinstance(row, dict):
                    rows.append(dict(row))
                if len(rows) >= limit:
                    break
        except (DatasetError, InputError, OSError, UnicodeError):
            pass
    return rows


def import_upload(
    engine: Engine,
    filename: str,
    data: bytes,
    *,
    kind: str | None = None,
    actor: Actor,
    via: str = "app",
    dry_run: bool = False,
    skip_bad_rows: bool = False,
) -> list[ImportSummary]:
    """``import_path`` for a file uploaded through the app: the same checks and messages as
    ``medrev review import``, naming the file as uploaded; the temporary copy is always removed.
    """
    if kind is not None and kind not in UPLOAD_KINDS:
        raise InvalidInput(f"a {kind} import needs a run directory; use `medrev review import DIRECTORY` for it")
    with _uploaded(filename, data) as path:
        try:
            summaries = import_path(
                engine, path, kind=kind, actor=actor, via=via, dry_run=dry_run, skip_bad_rows=skip_bad_rows
            )
        except ImportRefused as exc:
            raise ImportRefused([_renamed(i, path) for i in exc.issues], hint=exc.hint) from None
        except (InvalidInput, DatasetError, InputError) as exc:
            raise InvalidInput(_as_uploaded(str(exc), path)) from None
        return [
            dataclasses.replace(s, path=path.name, skipped=tuple(_renamed(i, path) for i in s.skipped))
            for s in summaries
        ]
