"""Import the run directories ``medrev bench run`` writes: a MedMisBench run and a retracted-paper (trojan) run.

A MedMisBench run brings its items (with the run's Type 1 targets) and every finished response with its
automatic FAIL/SUCCESS label; a retracted-paper run brings its records as items and each (record, model)
trace as a response carrying the judge's label, for a judge audit. Both go in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from sqlalchemy import Engine, tuple_
from sqlmodel import Session, select

from bench_core.kernel.errors import DatasetError, RowIssue
from review_app.db.limits import row_problems
from review_app.db.models import Item, ModelResponse
from review_app.services.actors import Actor
from review_app.services.errors import InvalidInput
from review_app.services.import_files import byte_problems, file_problem
from review_app.services.importing.common import (
    Body,
    ImportOptions,
    ImportRefused,
    ImportSummary,
    Rows,
    content_hash,
    importer,
    limit_issues,
    refuse_faults,
    run_import,
    settle,
    sorted_issues,
)
from review_app.services.importing.items import ITEM_FIELDS, item_row, write_items
from review_app.services.importing.responses import RESPONSE_FIELDS, write_responses

if TYPE_CHECKING:
    from bench_core.trojan import TrojanTrace

JUDGE_SUBSET = "RETRACTED"


def run_file_issues(run_dir: Path, names: Iterable[str], *, records: str | None = None) -> Rows:
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
    return Rows([], issues, fatal)


def import_run(engine: Engine, run_dir: str | Path, **options: Unpack[ImportOptions]) -> list[ImportSummary]:
    """Import a ``medrev bench run medmisbench`` directory: its items (with the run's Type 1 targets)
    and every finished response with its automatic FAIL/SUCCESS label, in one transaction.

    Responses keep the run's model label as the model configuration, and the endpoint, config
    hash, template and generation settings in their payload (never API keys: runs hold none).
    A damaged line in ``results.jsonl`` refuses the import (its response would be missing)
    unless ``skip_bad_rows``.
    """
    return run_import(engine, plan_run, run_dir, ("item", "model_response"), **options)


def plan_run(run_dir: Path, actor: Actor, via: str, skip_bad_rows: bool) -> Body:
    from bench_core.kernel.rundir import RUNS_FILE
    from bench_core.kernel.store import RESULTS_FILE
    from bench_core.medmisbench import ITEMS_FILE, RunDirError, item_warnings, read_run_data

    checked = run_file_issues(run_dir, (ITEMS_FILE, RESULTS_FILE, RUNS_FILE), records=RESULTS_FILE)
    refuse_faults(checked)
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
        problems = limit_issues(Item, row, str(run_dir / ITEMS_FILE), prepared.line, ITEM_FIELDS)
        issues += [RowIssue(p.file, p.line, p.field, f"item {prepared.item.id!r}: {p.message}") for p in problems]
        if not problems:  # a later refusal names the item's line of items.jsonl, not of the file it came from
            where = {"source_file": None, "source_line": prepared.line}
            item_rows.append((prepared.item.model_copy(update=where), row))
    if issues:  # a bad item or damaged record refuses (or, with skip, is left out with its responses)
        settle(issues, skip=skip_bad_rows, kept=len(item_rows))
    kept_items = {(item.subset, item.id) for item, _row in item_rows}

    def body(session: Session) -> list[ImportSummary]:
        who = importer(session, actor, via)
        new_items, n_items, _ = write_items(session, item_rows, run_dir / ITEMS_FILE, who=who)
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
            problems = limit_issues(ModelResponse, row, results, record.line, RESPONSE_FIELDS)
            if problems:
                response_issues.extend(
                    RowIssue(
                        p.file, p.line, p.field, f"response to {record.item_id!r} ({record.condition}): {p.message}"
                    )
                    for p in problems
                )
                continue
            rows.append((results, record.line or len(rows) + 1, row))
        new_responses, n_responses, skipped = write_responses(
            session, rows, response_issues, run_dir / RESULTS_FILE, who=who, skip=skip_bad_rows
        )
        skipped = tuple(sorted_issues([*issues, *skipped]))  # ``issues`` is empty unless skip_bad_rows
        return [
            ImportSummary("items", str(run_dir), n_items, new_items, n_items - new_items),
            ImportSummary(
                "responses", str(run_dir), n_responses, new_responses, n_responses - new_responses, skipped=skipped
            ),
        ]

    return body


def plan_judge(path: Path, actor: Actor, via: str) -> Body:
    """Plan a retracted-paper run's import (a ``bench run trojan`` directory, or ``records.json`` +
    ``traces.jsonl``) for a judge audit: each record becomes an item of kind ``retracted`` and each
    (record, model) trace a response carrying the judge's label and rationale.

    Flagged traces (no judge label) are imported too: clinicians can still give their label. A value the
    database cannot store is named by the file, line and field it was read from (:func:`judge_sources`).
    """
    from bench_core.kernel.rundir import RUNS_FILE
    from bench_core.kernel.store import RESULTS_FILE
    from bench_core.trojan import RECORDS_FILE, TRACES_FILE, RunDirError, read_traces

    checked = run_file_issues(path, (RECORDS_FILE, TRACES_FILE, RESULTS_FILE, RUNS_FILE))
    refuse_faults(checked)
    try:
        traces = read_traces(path)
    except RunDirError as exc:
        raise InvalidInput(str(exc)) from exc
    except DatasetError as exc:
        raise ImportRefused(exc.issues) from exc
    if not traces:
        raise ImportRefused([RowIssue(str(path), None, None, "the run holds no traces to import")])
    record_sources, trace_sources = judge_sources(path, traces)
    records: dict[str, dict[str, Any]] = {}
    issues: list[RowIssue] = []
    for trace in traces:
        if trace.record_id in records:
            continue
        records[trace.record_id] = _record_row(trace)
        where = record_sources.get(trace.record_id, (str(path / RECORDS_FILE), None, None))
        issues += located_limit_issues(Item, records[trace.record_id], [where], {"external_id": "id"})
    responses = [_trace_row(trace) for trace in traces]
    for row, sources in zip(responses, trace_sources, strict=True):
        issues += located_limit_issues(ModelResponse, row, sources, {"response_text": "model_response"})
    if issues:
        raise ImportRefused(sorted_issues(issues))

    def body(session: Session) -> list[ImportSummary]:
        item_rows = [(None, row) for row in records.values()]
        who = importer(session, actor, via)
        new_items, _kept, _ = write_items(session, item_rows, path, who=who)
        ids = dict(
            session.exec(
                select(Item.external_id, Item.id).where(
                    Item.subset == JUDGE_SUBSET, Item.external_id.in_(list(records))
                )
            ).all()
        )
        rows = []
        for trace, prepared, sources in zip(traces, responses, trace_sources, strict=True):
            row = {"item_id": ids[trace.record_id], **prepared}
            row["content_hash"] = content_hash(row)
            file, line, _written = sources[0]
            rows.append((file, line, row))
        new_responses, _kept, _ = write_responses(session, rows, [], path, who=who)
        return [
            ImportSummary("records", str(path), len(item_rows), new_items, len(item_rows) - new_items),
            ImportSummary("responses", str(path), len(rows), new_responses, len(rows) - new_responses),
        ]

    return body


def _record_row(trace: TrojanTrace) -> dict[str, Any]:
    """The ``item`` row of a trace's retracted-paper record, with its content hash."""
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
    return row


def _trace_row(trace: TrojanTrace) -> dict[str, Any]:
    """The ``model_response`` row of a trace, but for its item id and content hash (known once items are in)."""
    return {
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


# (file, line, the row as written there) a value of a judge run was read from
Source = tuple[str, int | None, Any]


def judge_sources(path: Path, traces: list[TrojanTrace]) -> tuple[dict[str, Source], list[list[Source]]]:
    """Where a judge run's records and traces were read: each record's element of ``records.json``, and for
    each trace the rows it was built from, its own row first.

    A trace of the demo format is its line of ``traces.jsonl`` (the reader makes one trace of every line);
    a trace of a ``bench run trojan`` directory is its answer's line of ``results.jsonl``, then the lines of
    the judge calls on that answer (those naming it as their target).
    """
    from bench_core.kernel.json_lines import element_lines
    from bench_core.kernel.rundir import read_json
    from bench_core.kernel.store import ResultStore
    from bench_core.trojan import RECORDS_FILE, TRACES_FILE, is_run_dir

    records_file = path / RECORDS_FILE
    value = read_json(records_file)
    rows = value.get("records", []) if isinstance(value, dict) else value
    lines = element_lines(records_file.read_text(encoding="utf-8"), "records" if isinstance(value, dict) else None)
    records = {
        str(row.get("id")).strip(): (str(records_file), line, row)
        for row, line in zip(rows, lines or [None] * len(rows), strict=False)
        if isinstance(row, dict)
    }
    if not is_run_dir(path):
        file = path / TRACES_FILE
        numbered = enumerate(file.read_text(encoding="utf-8").splitlines(), start=1)
        return records, [[(str(file), number, json.loads(text))] for number, text in numbered if text.strip()]
    store = ResultStore(path)
    results = sorted(((store.line_of(r["key"]), r) for r in store.latest().values()), key=lambda lr: lr[0] or 0)
    sources = []
    for trace in traces:
        mine = [(line, r) for line, r in results if r["key"]["item"] == trace.record_id]
        answers = [(line, r) for line, r in mine if _is_answer(r, trace)] or mine[:1]
        target = {name: answers[0][1]["key"][name] for name in ("model", "endpoint", "config")} if answers else {}
        judged = [(line, r) for line, r in mine if (r.get("meta") or {}).get("target") == target]
        found = [(str(store.path), line, r) for line, r in [*answers[:1], *judged]]
        sources.append(found or [(str(store.path), None, None)])
    return records, sources


def _is_answer(record: dict[str, Any], trace: TrojanTrace) -> bool:
    """Whether a result record is the trace's answer: the target's call (a judge call names its target in meta)."""
    key, meta = record["key"], record.get("meta") or {}
    return (
        "target" not in meta
        and (key["model"], key["endpoint"]) == (trace.model_name, trace.endpoint)
        and (meta.get("label") or key["model"]) == trace.model
    )


def located_limit_issues(
    model: Any, row: dict[str, Any], sources: list[Source], fields: dict[str, str]
) -> list[RowIssue]:
    """The values of ``row`` that ``model``'s table cannot store, each named by the file, line and field it was
    read from: the first of ``sources`` that holds it, else the first source and the file's field ``fields``
    gives the column. A JSON payload's values are checked one by one, so each is named by its own field.
    """
    payload = row.get("payload") or {}
    found = [(row[c], c, why) for c, why in row_problems(model, {k: v for k, v in row.items() if k != "payload"})]
    for key, value in payload.items():
        found += [(value, key, why) for _column, why in row_problems(model, {"payload": value})]
    issues = []
    for value, name, why in found:
        file, line, field = next(
            ((file, line, at) for file, line, written in sources if (at := _field_of(value, written)) is not None),
            (sources[0][0], sources[0][1], fields.get(name, name)),
        )
        issues.append(RowIssue(file, line, field, f"the value {why}"))
    return issues


def _field_of(value: Any, written: Any, at: str = "") -> str | None:
    """Where in ``written`` (a row as read from JSON) the text ``value`` is, as ``a.b[0].c``; None if nowhere."""
    if at and isinstance(written, str) and isinstance(value, str) and written.strip() == value.strip():
        return at
    children = written.items() if isinstance(written, dict) else enumerate(written) if isinstance(written, list) else ()
    for name, child in children:
        found = _field_of(value, child, f"{at}[{name}]" if isinstance(written, list) else f"{at}.{name}".lstrip("."))
        if found is not None:
            return found
    return None
