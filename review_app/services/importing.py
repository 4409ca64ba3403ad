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

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine, tuple_
from sqlmodel import Session, select

from bench_core.kernel.errors import DatasetError, RowIssue
from bench_core.kernel.tabular import cell, iter_rows, tabular_files
from bench_core.medmisbench import DEFAULT_SEED, MCQItem, draw_type1_target, load_medmisbench
from review_app.db.engine import write_session
from review_app.db.models import AUTO_LABELS, ImportBatch, Item, ModelResponse, Reviewer, utcnow
from review_app.db.statistics import refresh_statistics
from review_app.services import audit
from review_app.services.accounts import UserProfile, change_account, create_account
from review_app.services.actors import LEAD_ROLES, Actor, acting_user
from review_app.services.errors import Conflict, InvalidInput, ServiceError


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

    def __init__(self, issues: list[RowIssue], *, limit: int = 20) -> None:
        self.issues = issues
        shown = "\n".join(f"  - {issue}" for issue in issues[:limit])
        more = f"\n  ... and {len(issues) - limit} more" if len(issues) > limit else ""
        super().__init__(f"import refused, nothing was written ({len(issues)} problem(s)):\n{shown}{more}")


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

    def __str__(self) -> str:
        extra = f", {self.updated} updated" if self.updated else ""
        return f"{self.kind}: {self.rows} rows from {self.path}: {self.new} new, {self.unchanged} unchanged{extra}"


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
    files = tabular_files(path)
    for _line, row in iter_rows(files[0]):
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
    raise ImportRefused([RowIssue(str(files[0]), None, None, "the file has no rows")])


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
) -> ImportSummary:
    """Import items in the released MedMisBench format (a file or a folder of subset files).

    With ``dry_run`` everything is validated and counted in a transaction that is rolled back.
    """
    path = Path(path)
    try:
        report = load_medmisbench(path, strict=True)
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    rows = [(item, item_row(item, target_seed=target_seed)) for item in report.items]
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        new = _write_items(session, rows, path, who=_importer(session, actor, via))
        dry.done(ImportSummary("items", str(path), len(rows), new, len(rows) - new))
    _analyze(engine, dry, "item")
    return dry.result


def _write_items(
    session: Session, rows: list[tuple[MCQItem | None, dict[str, Any]]], path: Path, *, who: _Importer
) -> int:
    """Insert the new items (refusing changed ones) in the caller's transaction; returns how many were new."""
    existing = _existing(
        session, Item, (Item.subset, Item.external_id), [(r["subset"], r["external_id"]) for _i, r in rows]
    )
    issues: list[RowIssue] = []
    new_rows: list[dict[str, Any]] = []
    for item, row in rows:
        found = existing.get((row["subset"], row["external_id"]))
        if found is None:
            new_rows.append(row)
        elif found != row["content_hash"]:
            issues.append(
                RowIssue(
                    (item.source_file if item else None) or str(path),
                    item.source_line if item else None,
                    "id",
                    f"item {row['external_id']!r} ({row['subset']}) is already in the database with different "
                    "content (question, options, bundle or Type 1 target); give the changed item a new id",
                )
            )
    if issues:
        raise ImportRefused(issues)
    batch = _batch(session, "items", path, len(rows), len(new_rows), who.label)
    _bulk_insert(session, Item, new_rows, batch.id)
    audit.record(
        session,
        actor_id=who.id,
        action="import.items",
        entity="import_batch",
        entity_id=batch.id,
        after={"file": str(path), "rows": len(rows), "new": len(new_rows)},
    )
    return len(new_rows)


# ---------------------------------------------------------------- responses


def _pick(row: dict[str, Any], name: str) -> str | None:
    lowered = {str(k).strip().lower(): v for k, v in row.items()}
    for alias in _RESPONSE_ALIASES.get(name, (name,)):
        value = cell(lowered, alias)
        if value is not None:
            return value
    return None


def import_responses(
    engine: Engine, path: str | Path, *, actor: Actor, via: str = "cli", dry_run: bool = False
) -> ImportSummary:
    """Import model responses (JSONL/CSV: item_id, model, condition, response, reasoning, chosen, result).

    ``result`` is the automatic label: SUCCESS when the model chose the gold answer, FAIL
    otherwise; it is derived from ``chosen`` when absent and must agree with it when present.
    """
    path = Path(path)
    parsed: list[tuple[str, int, dict[str, Any]]] = []
    issues: list[RowIssue] = []
    for file in tabular_files(path):
        for line, row in iter_rows(file):
            if isinstance(row, RowIssue):
                issues.append(row)
            else:
                parsed.append((str(file), line, row))
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        who = _importer(session, actor, via)
        items = _items_for(session, {_pick(r, "item_id") for _f, _l, r in parsed} - {None})
        rows: list[tuple[str, int, dict[str, Any]]] = []
        for file, line, raw in parsed:
            result = _response_row(raw, items, file=file, line=line)
            if isinstance(result, RowIssue):
                issues.append(result)
            else:
                rows.append((file, line, result))
        new = _write_responses(session, rows, issues, path, who=who)
        dry.done(ImportSummary("responses", str(path), len(rows), new, len(rows) - new))
    _analyze(engine, dry, "model_response")
    return dry.result


def _write_responses(
    session: Session,
    rows: list[tuple[str, int, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    *,
    who: _Importer,
) -> int:
    """Insert the new responses in the caller's transaction (refusing duplicates and changed ones)."""
    seen: dict[tuple, str] = {}
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
        seen.setdefault(key, f"line {line}")
    existing = _existing(
        session, ModelResponse, (ModelResponse.item_id, ModelResponse.model, ModelResponse.condition), list(seen)
    )
    new_rows = []
    for file, line, row in rows:
        found = existing.get((row["item_id"], row["model"], row["condition"]))
        if found is None:
            new_rows.append(row)
        elif found != row["content_hash"]:
            issues.append(
                RowIssue(
                    file, line, None, "a different response for this item, model and condition is already imported"
                )
            )
    if issues:
        raise ImportRefused(issues)
    batch = _batch(session, "responses", path, len(rows), len(new_rows), who.label)
    _bulk_insert(session, ModelResponse, new_rows, batch.id)
    audit.record(
        session,
        actor_id=who.id,
        action="import.responses",
        entity="import_batch",
        entity_id=batch.id,
        after={"file": str(path), "rows": len(rows), "new": len(new_rows)},
    )
    return len(new_rows)


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


def import_run(
    engine: Engine, run_dir: str | Path, *, actor: Actor, via: str = "cli", dry_run: bool = False
) -> list[ImportSummary]:
    """Import a ``medrev bench run medmisbench`` directory: its items (with the run's Type 1 targets)
    and every finished response with its automatic FAIL/SUCCESS label, in one transaction.

    Responses keep the run's model label as the model configuration, and the endpoint, config
    hash, template and generation settings in their payload (never API keys: runs hold none).
    """
    from bench_core.medmisbench import RunDirError, read_run_data

    run_dir = Path(run_dir)
    try:
        data = read_run_data(run_dir)
    except RunDirError as exc:
        raise InvalidInput(str(exc)) from exc
    item_rows = [(p.item, item_row(p.item, target=p.target)) for p in data.items]
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        who = _importer(session, actor, via)
        new_items = _write_items(session, item_rows, run_dir / "items.jsonl", who=who)
        ids = {
            (subset, external): item_id
            for item_id, subset, external in session.exec(
                select(Item.id, Item.subset, Item.external_id).where(
                    tuple_(Item.subset, Item.external_id).in_([(r["subset"], r["external_id"]) for _i, r in item_rows])
                )
            )
        }
        rows = []
        for number, record in enumerate(data.responses, start=1):
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
            rows.append((str(run_dir / "results.jsonl"), number, row))
        new_responses = _write_responses(session, rows, [], run_dir / "results.jsonl", who=who)
        dry.done(
            [
                ImportSummary("items", str(run_dir), len(item_rows), new_items, len(item_rows) - new_items),
                ImportSummary("responses", str(run_dir), len(rows), new_responses, len(rows) - new_responses),
            ]
        )
    _analyze(engine, dry, "item", "model_response")
    return dry.result


# ---------------------------------------------------------------- retracted-paper runs (judge audit)


def import_judge_run(
    engine: Engine, path: str | Path, *, actor: Actor, via: str = "cli", dry_run: bool = False
) -> list[ImportSummary]:
    """Import a retracted-paper run (a ``bench run trojan`` directory, or ``records.json`` +
    ``traces.jsonl``) for a judge audit: each record becomes an item of kind ``retracted`` and each
    (record, model) trace a response carrying the judge's label and rationale.

    Flagged traces (no judge label) are imported too: clinicians can still give their label.
    """
    from bench_core.trojan import RunDirError, read_traces

    path = Path(path)
    try:
        traces = read_traces(path)
    except RunDirError as exc:
        raise InvalidInput(str(exc)) from exc
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
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
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        item_rows = [(None, row) for row in records.values()]
        who = _importer(session, actor, via)
        new_items = _write_items(session, item_rows, path, who=who)
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
        new_responses = _write_responses(session, rows, [], path, who=who)
        dry.done(
            [
                ImportSummary("records", str(path), len(item_rows), new_items, len(item_rows) - new_items),
                ImportSummary("responses", str(path), len(rows), new_responses, len(rows) - new_responses),
            ]
        )
    _analyze(engine, dry, "item", "model_response")
    return dry.result


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
    engine: Engine, path: str | Path, *, actor: Actor, via: str = "cli", dry_run: bool = False
) -> ImportSummary:
    """Import or update reviewer accounts from a roster (no passwords: set them with ``user passwd``).

    Columns: username (required), display_name and role (required for new accounts), email,
    profession, country, years, languages. A column the file leaves out leaves that field of
    existing accounts unchanged; an empty cell in a present column clears the field (display_name
    and role cannot be cleared). Every row obeys the account rules for the importing user.
    """
    path = Path(path)
    issues: list[RowIssue] = []
    rows: list[tuple[str, int, dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for file in tabular_files(path):
        for line, raw in iter_rows(file):
            if isinstance(raw, RowIssue):
                issues.append(raw)
                continue
            lowered = {str(k).strip().lower(): v for k, v in raw.items()}
            if cell(lowered, "username") is None:
                issues.append(RowIssue(str(file), line, "username", "missing username"))
                continue
            if any(k in lowered for k in ("password", "password_hash")):
                issues.append(RowIssue(str(file), line, "password", "rosters must not carry passwords"))
                continue
            fields = _roster_fields(lowered, str(file), line)
            if isinstance(fields, RowIssue):
                issues.append(fields)
                continue
            name = fields["username"]
            if name in seen:
                issues.append(RowIssue(str(file), line, "username", f"duplicate username (first at line {seen[name]})"))
                continue
            seen[name] = line
            rows.append((str(file), line, fields))
    if issues:
        raise ImportRefused(issues)
    new = updated = 0
    with _maybe_dry(dry_run) as dry, write_session(engine) as session:
        who = _importer(session, actor, via)
        me = session.get(Reviewer, who.id) if who.id is not None else None
        existing = {u.username: u for u in session.exec(select(Reviewer).where(Reviewer.username.in_(list(seen))))}
        accounts: list[Reviewer] = []
        for file, line, fields in rows:
            user = existing.get(fields["username"])
            try:
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
        if issues:
            raise ImportRefused(issues)
        _batch(session, "roster", path, len(rows), new, who.label)
        dry.done(
            ImportSummary(
                "roster",
                str(path),
                len(rows),
                new,
                len(rows) - new - updated,
                updated,
                usernames=tuple(u.username for u in accounts),
                reviewers=tuple(u.username for u in accounts if u.role == "reviewer" and u.active),
            )
        )
    return dry.result


# ---------------------------------------------------------------- helpers


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
        filename=str(path),
        sha256=file_sha256(path),
        n_rows=rows,
        n_new=new,
        n_unchanged=rows - new,
        actor=actor,
    )
    session.add(batch)
    session.flush()
    return batch


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


def import_path(
    engine: Engine,
    path: str | Path,
    *,
    kind: str | None = None,
    actor: Actor,
    via: str = "cli",
    dry_run: bool = False,
) -> list[ImportSummary]:
    """Import a file, a folder of subset files or a bench run directory (``kind`` detected if None)."""
    path = Path(path)
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or folder")
    kind = kind or detect_kind(path)
    if kind not in KINDS:
        raise InvalidInput(f"unknown import kind {kind!r}; expected one of {', '.join(KINDS)}")
    options = {"actor": actor, "via": via, "dry_run": dry_run}
    if kind == "run":
        return import_run(engine, path, **options)
    if kind == "judge":
        return import_judge_run(engine, path, **options)
    if kind == "items":
        return [import_items(engine, path, **options)]
    if kind == "responses":
        return [import_responses(engine, path, **options)]
    return [import_roster(engine, path, **options)]
