"""Import model responses from a JSONL or CSV file (item_id, model, condition, response, reasoning, chosen, result).

A response is keyed by (item, model, condition) and names an item imported before; the file's columns
may use the names bench runs and other tools write (``RESPONSE_ALIASES``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Unpack

from sqlalchemy import Engine
from sqlmodel import Session, select

from bench_core.kernel.errors import RowIssue
from bench_core.kernel.tabular import cell
from review_app.db.models import AUTO_LABELS, Item, ModelResponse
from review_app.services.actors import Actor
from review_app.services.importing.common import (
    Body,
    Importer,
    ImportOptions,
    ImportSummary,
    Rows,
    admit,
    content_hash,
    existing_hashes,
    importer,
    read_rows,
    refuse_faults,
    run_import,
    write_batch,
)

_CONDITION_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")
RESPONSE_ALIASES: dict[str, tuple[str, ...]] = {
    "item_id": ("item_id", "id", "question_id"),
    "response": ("response", "response_text", "text", "final_response"),
    "reasoning": ("reasoning", "reasoning_trace", "thinking_process", "thinking"),
    "chosen": ("chosen", "chosen_label", "chosen_option", "answer_letter", "prediction"),
    "result": ("result", "auto_label", "label"),
}
# response column -> the file's column, for the messages about values the database cannot store
RESPONSE_FIELDS = {"response_text": "response", "chosen_label": "chosen", "auto_label": "result"}
RESPONSE_FIELDS |= {"target_label": "target", "item_id": "item_id"}


def _pick(row: dict[str, Any], name: str) -> str | None:
    lowered = {str(k).strip().lower(): v for k, v in row.items()}
    for alias in RESPONSE_ALIASES.get(name, (name,)):
        value = cell(lowered, alias)
        if value is not None:
            return value
    return None


_RESPONSE_COLUMNS = {alias for aliases in RESPONSE_ALIASES.values() for alias in aliases}
_RESPONSE_COLUMNS |= {"subset", "condition", "target", "model", "run_id", "prompt_version", "config_hash", "endpoint"}


def import_responses(engine: Engine, path: str | Path, **options: Unpack[ImportOptions]) -> ImportSummary:
    """Import model responses (JSONL/CSV: item_id, model, condition, response, reasoning, chosen, result).

    ``result`` is the automatic label: SUCCESS when the model chose the gold answer, FAIL
    otherwise; it is derived from ``chosen`` when absent and must agree with it when present.
    """
    (summary,) = run_import(engine, plan_responses, path, ("model_response",), **options)
    return summary


def plan_responses(path: Path, actor: Actor, via: str, skip: bool) -> Body:
    read = read_rows(path, columns=_RESPONSE_COLUMNS)
    refuse_faults(read)
    return lambda session: [_import_responses_in(session, read, path, actor, via, skip)]


def _import_responses_in(session: Session, read: Rows, path: Path, actor: Actor, via: str, skip: bool) -> ImportSummary:
    who = importer(session, actor, via)
    issues = list(read.issues)
    items = _items_for(session, {_pick(r, "item_id") for _f, _l, r in read.rows} - {None})
    rows: list[tuple[str, int, dict[str, Any]]] = []
    for file, line, raw in read.rows:
        result = _response_row(raw, items, file=file, line=line)
        if admit(result, ModelResponse, file, line, RESPONSE_FIELDS, issues):
            rows.append((file, line, result))
    new, kept, skipped = write_responses(session, rows, issues, path, who=who, skip=skip)
    return ImportSummary("responses", str(path), kept, new, kept - new, skipped=skipped)


def write_responses(
    session: Session,
    rows: list[tuple[str, int, dict[str, Any]]],
    issues: list[RowIssue],
    path: Path,
    *,
    who: Importer,
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
    existing = existing_hashes(
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
    new = len(new_rows)
    skipped = write_batch(
        session,
        "responses",
        path,
        who=who,
        issues=issues,
        skip=skip,
        kept=kept,
        new=new,
        model=ModelResponse,
        new_rows=new_rows,
    )
    return new, kept, skipped


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
