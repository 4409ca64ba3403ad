"""Bad run directories for the ``bench`` commands that write into one or read one.

Each case asserts (``corpus.check``) a clean refusal that leaves the case folder unchanged: another
benchmark's run directory (or a generation's) as ``--out``, a run directory another run holds, results,
items and run logs damaged or edited by hand, folders that are no run for ``report``, ``compare``,
``generate-report``, ``regenerate`` and ``reassign-provenance``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.bad_inputs.bench_support import (
    DEAD,
    HC_ROW,
    MMB_RUN,
    ROW,
    TJ_ROW,
    TROJAN_RUN,
    folder,
    jsonl,
    old_run,
)
from tests.bad_inputs.corpus import Case, check, parametrize, write


def damage_middle(path: Path, line: int) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1][: len(lines[line - 1]) // 2]
    path.write_bytes(b"\n".join(lines))


def with_damaged_results(w: Path) -> str:
    run = old_run(w)
    damage_middle(run / "results.jsonl", 5)
    return str(run)


def hc_run_dir(w: Path) -> str:
    run = w / "hc"
    write(run / "instances.jsonl", [{"instance_id": "1"}])
    write(run / "runs.jsonl", [{"benchmark": "healthcontradict"}])
    return str(run)


_HELD_LOCKS: list[int] = []  # run-directory locks a case holds while its command runs (closed after each test)


def locked_run(w: Path) -> str:
    """A run directory whose lock another run holds: an open file with an exclusive ``flock`` (this process's;
    the command opens the file again, and flock refuses a second open file even in the same process)."""
    run = old_run(w)
    fd = os.open(run / ".medrev-run.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()} lab-host 2026-01-01T09:00:00+00:00\n".encode())
    _HELD_LOCKS.append(fd)
    return str(run)


@pytest.fixture(autouse=True)
def _release_held_locks() -> Iterator[None]:
    yield
    while _HELD_LOCKS:
        os.close(_HELD_LOCKS.pop())


SENSITIVITY = ["--model", "g", "--base-url", DEAD, "--no-progress"]


def derive(command: str, source: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    """``bench regenerate`` or ``bench reassign-provenance`` from the run ``source`` makes, into ``o``."""
    return lambda w: ["bench", command, "--from", source(w), "--out", str(w / "o"), *SENSITIVITY, *extra]


def mmb_into(directory: Callable[[Path], str]) -> Callable[[Path], list[str]]:
    return lambda w: [*MMB_RUN, "--data", write(w / "a.jsonl", jsonl([ROW])), "--out", directory(w)]


RUN_DIRS: list[Case] = [
    Case("rundir-other-benchmark", mmb_into(hc_run_dir), ("hc", "healthcontradict run directory")),
    Case(
        "rundir-medmisbench-into-trojan",
        mmb_into(lambda w: str(Path(write(w / "tj" / "records.json", "[]")).parent)),
        ("tj", "trojan"),
    ),
    Case(
        "rundir-medmisbench-into-generation",
        mmb_into(lambda w: str(Path(write(w / "gen" / "source_items.jsonl", "")).parent)),
        ("gen", "generation"),
    ),
    Case(
        "rundir-healthcontradict-into-medmisbench",
        lambda w: [
            "bench",
            "run",
            "healthcontradict",
            "--data",
            write(w / "i.jsonl", [HC_ROW]),
            "--model",
            "m",
            "--base-url",
            DEAD,
            "--out",
            str(old_run(w)),
            "--no-progress",
        ],
        ("old", "medmisbench"),
    ),
    Case(
        "rundir-trojan-into-medmisbench",
        lambda w: [*TROJAN_RUN, "--data", write(w / "t.json", json.dumps([TJ_ROW])), "--out", str(old_run(w))],
        ("old", "medmisbench"),
    ),
    Case(
        "rundir-busy",
        mmb_into(locked_run),
        (f"another run (pid {os.getpid()} on lab-host, started 2026-01-01T09:00:00+00:00) holds this folder",),
    ),
    Case("rundir-damaged-results-run", mmb_into(with_damaged_results), ("results.jsonl:5", "damaged")),
    Case(
        "rundir-damaged-results-report",
        lambda w: ["bench", "report", with_damaged_results(w), "--no-figures"],
        ("results.jsonl:5", "damaged"),
    ),
    Case(
        "rundir-damaged-results-report-json",
        lambda w: ["bench", "report", with_damaged_results(w), "--json"],
        ("results.jsonl:5",),
    ),
    Case(
        "rundir-damaged-items",
        lambda w: [
            "bench",
            "report",
            str((lambda r: (damage_middle(r / "items.jsonl", 3), r)[1])(old_run(w))),
            "--json",
        ],
        ("items.jsonl:3",),
    ),
    Case("report-missing", lambda w: ["bench", "report", str(w / "nope")], ("nope", "no such")),
    Case("report-not-a-run", lambda w: ["bench", "report", folder(w / "plain")], ("plain", "not a run directory")),
    Case("report-a-file", lambda w: ["bench", "report", write(w / "f.jsonl", jsonl([ROW]))], ("f.jsonl",)),
    Case(
        "report-out-is-a-file",
        lambda w: ["bench", "report", str(old_run(w)), "--out", write(w / "f.txt", "x")],
        ("f.txt",),
    ),
    Case(
        "report-out-below-a-file",
        lambda w: ["bench", "report", str(old_run(w)), "--out", str(Path(write(w / "f.txt", "x")) / "sub")],
        ("f.txt is a file",),
    ),
    Case("compare-missing", lambda w: ["bench", "compare", str(w / "a"), str(w / "b")], ("a",)),
    Case("compare-not-runs", lambda w: ["bench", "compare", folder(w / "a"), folder(w / "b")], ("a",)),
    Case("compare-runs-missing", lambda w: ["bench", "compare-runs", str(w / "a"), str(w / "b")], ("a",)),
    Case("generate-report-missing", lambda w: ["bench", "generate-report", str(w / "nope")], ("nope",)),
    Case("generate-report-not-generation", lambda w: ["bench", "generate-report", str(old_run(w))], ("old",)),
    Case("regenerate-from-missing", derive("regenerate", lambda w: str(w / "nope")), ("nope",)),
    Case("reassign-from-not-generation", derive("reassign-provenance", lambda w: str(old_run(w))), ("old",)),
]


def replace_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def edited(file: str, line: int, text: str) -> Callable[[Path], str]:
    def make(w: Path) -> str:
        run = old_run(w)
        replace_line(run / file, line, text)
        return str(run)

    return make


RUN_DIRS += [
    Case(
        "rundir-result-for-an-item-not-in-items",
        lambda w: ["bench", "report", _result_for_unknown_item(w), "--json"],
        ("results.jsonl:3", "'key.item'", "MEDMISQA/ghost", "not in items.jsonl"),
    ),
    Case(
        "rundir-items-gold-not-an-option",
        lambda w: ["bench", "report", _edited_item(w, 2, gold="Z"), "--json"],
        ("items.jsonl:2", "'item.gold'", "gold answer 'Z' is not among the options"),
    ),
    Case(
        "rundir-items-markup-content-type",
        lambda w: ["bench", "report", _edited_item(w, 3, injection={"content_type": "[b]cue_remapping[/b]"})],
        ("items.jsonl:3", "'item.injection.content_type'", "markup"),
    ),
    Case(
        "rundir-items-row-without-item",
        lambda w: ["bench", "report", edited("items.jsonl", 2, '{"x": 1}')(w), "--json"],
        ("items.jsonl", "record 2"),
    ),
    Case(
        "rundir-results-record-without-key-fields",
        lambda w: ["bench", "report", edited("results.jsonl", 3, '{"key": {"item": "x"}, "status": "ok"}')(w)],
        ("results.jsonl:3", "damaged"),
    ),
    Case(
        "rundir-results-unknown-status",
        lambda w: ["bench", "report", edited("results.jsonl", 2, '{"key": {}, "status": "maybe"}')(w)],
        ("results.jsonl:2",),
    ),
    Case(
        "rundir-runs-log-damaged",
        lambda w: [*MMB_RUN, "--data", write(w / "a.jsonl", jsonl([ROW])), "--out", _two_line_runs_log(w)],
        ("runs.jsonl:1",),
    ),
]


def _result_for_unknown_item(w: Path) -> str:
    run = old_run(w)
    path = run / "results.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    record = json.loads(lines[2])
    record["key"]["item"] = "MEDMISQA/ghost"
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(run)


def _edited_item(w: Path, line: int, *, injection: dict | None = None, **changes: object) -> str:
    """The old run with the item on ``line`` of items.jsonl changed (``changes`` to the item, ``injection`` to its
    bundle): a file edited by hand."""
    run = old_run(w)
    path = run / "items.jsonl"
    lines = path.read_text(encoding="utf-8").split("\n")
    row = json.loads(lines[line - 1])
    row["item"].update(changes)
    if injection:
        row["item"]["injection"].update(injection)
    lines[line - 1] = json.dumps(row)
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(run)


def _two_line_runs_log(w: Path) -> str:
    run = old_run(w)
    log = run / "runs.jsonl"
    log.write_text('{"benchmark": "medmisbench", "cut\n' + log.read_text(encoding="utf-8"), encoding="utf-8")
    return str(run)


RUN_DIRS += [
    Case(
        "regenerate-provider",
        derive("regenerate", lambda w: str(old_run(w)), "--provider", "acme"),
        ("--provider", "acme"),
    ),
    Case(
        "reassign-temperature",
        derive("reassign-provenance", lambda w: str(old_run(w)), "--temperature", "-3"),
        ("--temperature",),
    ),
    Case(
        "regenerate-out-is-a-run-dir",
        lambda w: ["bench", "regenerate", "--from", str(old_run(w)), "--out", str(old_run(w, "other")), *SENSITIVITY],
        ("other", "medmisbench"),
    ),
]


@parametrize(RUN_DIRS)
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
