"""Bad run directories to ``medrev review import``: a benchmark's run or a judge's, damaged or edited by hand.

Each case runs against the seeded review database on SQLite and on PostgreSQL (``review_support``) and
is refused naming the file and line (and field) of the damage, with the case folder and every table's
row count unchanged.
"""

from __future__ import annotations

import json
import shutil
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
]


@parametrize(RUN_CASES)
def test_bad_review_import_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check_on(case, database, tmp_path)
