"""Bad run directories to ``medrev review import``: a benchmark's run or a judge's, damaged or edited by hand.

Each case runs against the seeded review database on SQLite and on PostgreSQL (``review_support``) and
is refused naming the file and line (and field) of the damage, with the case folder and every table's
row count unchanged.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.corpus import Case, parametrize
from tests.bad_inputs.review_support import check_on
from tests.conftest import ROOT

OLD_RUN = ROOT / "tests" / "data" / "medmisbench_old_run"
JUDGE_RUN = ROOT / "review_app" / "demo_data" / "trojan"


def copy_run(work: Path, source: Path = OLD_RUN) -> Path:
    target = work / "run"
    shutil.copytree(source, target)
    return target


def damage_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[number - 1] = text
    path.write_text("".join(lines), encoding="utf-8")


def run_with_damaged_middle(work: Path) -> list[str]:
    run = copy_run(work)
    damage_line(run / "results.jsonl", 5, '{"key": {"item": "broken\n')
    return ["review", "import", str(run)]


def run_with_cut_last_line(work: Path) -> list[str]:
    run = copy_run(work)
    results = run / "results.jsonl"
    data = results.read_bytes().rstrip(b"\n")
    cut = data.rfind(b"\n") + 1
    results.write_bytes(data[: cut + (len(data) - cut) // 2])  # a kill in the middle of the last write
    return ["review", "import", str(run)]


def run_results_folder(work: Path) -> list[str]:
    run = copy_run(work)
    (run / "results.jsonl").unlink()
    (run / "results.jsonl").mkdir()
    return ["review", "import", str(run), "--kind", "run"]


def run_items_nul(work: Path) -> list[str]:
    run = copy_run(work)
    items = run / "items.jsonl"
    items.write_bytes(items.read_bytes().replace(b'"', b'"\x00', 1))
    return ["review", "import", str(run), "--kind", "run"]


def run_with_result_for_unknown_item(work: Path) -> list[str]:
    run = copy_run(work)
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    record = json.loads(lines[2])
    record["key"]["item"] = "MEDMISQA/ghost"
    damage_line(run / "results.jsonl", 3, json.dumps(record) + "\n")
    return ["review", "import", str(run)]


def run_with_edited_item(work: Path, *, authors: bool) -> list[str]:
    """The old run with line 2's gold answer set to no option; with ``authors`` every item is first made one of
    the authors' protocol (which evaluates such an item: only medrev's item check refuses it)."""
    run = copy_run(work)
    path = run / "items.jsonl"
    rows = [json.loads(text) for text in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if authors:
            row["item"]["reading"] = "authors"
            row["protocol"] = "authors"
    rows[1]["item"]["gold"] = "Z"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return ["review", "import", str(run)]


def judge_with_damaged_middle(work: Path) -> list[str]:
    run = copy_run(work, JUDGE_RUN)
    damage_line(run / "traces.jsonl", 3, "{not json\n")
    return ["review", "import", str(run), "--kind", "judge"]


def judge_with_edited_trace(work: Path, number: int, field: str, value: str) -> list[str]:
    """The demo judge run with ``field`` of ``traces.jsonl`` line ``number`` set to ``value``."""
    run = copy_run(work, JUDGE_RUN)
    path = run / "traces.jsonl"
    trace = json.loads(path.read_text(encoding="utf-8").splitlines()[number - 1])
    damage_line(path, number, json.dumps(trace | {field: value}) + "\n")
    return ["review", "import", str(run), "--kind", "judge"]


def judge_with_edited_record(work: Path, index: int, field: str, value: str) -> list[str]:
    """The demo judge run with ``field`` of record ``index`` of ``records.json`` set to ``value`` (the record's
    traces follow a changed id)."""
    run = copy_run(work, JUDGE_RUN)
    path = run / "records.json"
    records = json.loads(path.read_text(encoding="utf-8"))
    old_id = records[index]["id"]
    records[index][field] = value
    path.write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
    if field == "id":
        traces = [json.loads(text) for text in (run / "traces.jsonl").read_text(encoding="utf-8").splitlines()]
        lines = [json.dumps(t | {"id": value} if t["id"] == old_id else t) + "\n" for t in traces]
        (run / "traces.jsonl").write_text("".join(lines), encoding="utf-8")
    return ["review", "import", str(run), "--kind", "judge"]


def judge_run_dir(work: Path, *, answer: str, rationale: str) -> list[str]:
    """A ``bench run trojan`` directory: the demo's first record answered by one model (``results.jsonl`` line 1)
    and judged once (line 2)."""
    run = work / "run"
    run.mkdir()
    record = json.loads((JUDGE_RUN / "records.json").read_text(encoding="utf-8"))[0]
    (run / "records.json").write_text(json.dumps({"records": [record]}, indent=2) + "\n", encoding="utf-8")
    (run / "runs.jsonl").write_text(json.dumps({"benchmark": "trojan"}) + "\n", encoding="utf-8")
    target = {"model": "target-a", "endpoint": "http://127.0.0.1:9/v1", "config": "c-target"}
    judge = {"model": "judge-x", "endpoint": "http://127.0.0.1:9/v1", "config": "c-judge"}
    results = [
        {
            "key": {"benchmark": "trojan", "item": record["id"], "condition": "answer", **target},
            "status": "ok",
            "messages": [{"role": "user", "content": record["problem"]}],
            "response": {"text": answer},
            "meta": {"label": "target-a"},
        },
        {
            "key": {"benchmark": "trojan", "item": record["id"], "condition": "judge", **judge},
            "status": "ok",
            "messages": [{"role": "user", "content": "Score the answer."}],
            "response": {"text": f"Score: 1\n{rationale}"},
            "parsed": {"score": 1, "rationale": rationale},
            "meta": {"target": target, "answer_sha256": hashlib.sha256(answer.encode()).hexdigest()},
        },
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results), encoding="utf-8")
    return ["review", "import", str(run), "--kind", "judge"]


def edited_trace(number: int, field: str, value: str) -> Callable[[Path], list[str]]:
    return lambda work: judge_with_edited_trace(work, number, field, value)


def edited_record(index: int, field: str, value: str) -> Callable[[Path], list[str]]:
    return lambda work: judge_with_edited_record(work, index, field, value)


def judge_run(answer: str, rationale: str) -> Callable[[Path], list[str]]:
    return lambda work: judge_run_dir(work, answer=answer, rationale=rationale)


# Values the database cannot store, each named by the file, line and field it was read from.
JUDGE_CASES = [
    ("judge-model-name-too-long", edited_trace(2, "model", "m" * 300), ("traces.jsonl:2", "'model'", "at most 200")),
    ("judge-rationale-nul", edited_trace(4, "judge_rationale", "\x00"), ("traces.jsonl:4", "'judge_rationale'", "NUL")),
    ("judge-prompt-nul", edited_trace(5, "prompt", "Do NSAIDs\x00 help?"), ("traces.jsonl:5", "'prompt'", "NUL")),
    ("judge-record-id-too-long", edited_record(1, "id", "r" * 300), ("records.json:10", "'id'", "at most 200")),
    ("judge-record-title-nul", edited_record(2, "title", "A\x00 trial"), ("records.json:18", "'title'", "NUL")),
    ("judge-run-answer-nul", judge_run("Yes.\x00", "Trusts it."), ("results.jsonl:1", "'response.text'", "NUL")),
    ("judge-run-rationale-nul", judge_run("Yes.", "Trusts\x00 it."), ("results.jsonl:2", "'parsed.rationale'", "NUL")),
]
RUN_CASES = [
    Case("run-damaged-middle-line", run_with_damaged_middle, ("results.jsonl:5", "damaged")),
    Case("run-last-line-cut-short", run_with_cut_last_line, ("results.jsonl:21", "cut short")),
    Case("run-results-is-a-folder", run_results_folder, ("results.jsonl", "folder")),
    Case("run-items-nul-byte", run_items_nul, ("items.jsonl:1", "NUL")),
    Case("judge-damaged-middle-line", judge_with_damaged_middle, ("traces.jsonl:3", "damaged")),
    Case(
        "run-result-for-an-item-not-in-items",
        run_with_result_for_unknown_item,
        ("results.jsonl:3", "'key.item'", "MEDMISQA/ghost"),
    ),
    Case(
        "run-item-edited-gold-not-an-option",
        lambda w: run_with_edited_item(w, authors=False),
        ("items.jsonl:2", "'item.gold'", "gold answer 'Z' is not among the options"),
    ),
    Case(
        "run-authors-item-gold-not-an-option",
        lambda w: run_with_edited_item(w, authors=True),
        ("items.jsonl:2", "'item.gold'", "gold answer 'Z' is not among the options", "--skip-bad-rows"),
    ),
    *(Case(name, make, mentions) for name, make, mentions in JUDGE_CASES),
]


@parametrize(RUN_CASES)
def test_bad_review_import_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check_on(case, database, tmp_path)
