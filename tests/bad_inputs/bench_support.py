"""What the bench corpora of bad input build on: the rows, the file writers and the command lines.

Every ``tests/bad_inputs/test_bench_*.py`` module builds its cases from these, so a row or a command line
is written once: ``ROW`` (a released MedMisBench row), ``HC_ROW``, ``TJ_ROW``; the writers of each source
format (JSON Lines, CSV, Parquet) and of the things that are not files (a named pipe, a folder); a copy of
the committed old run; and ``DEAD``, the model endpoint nothing listens on (a case that reached a model
call would fail differently from a refusal).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.corpus import Case, write
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data"
DEAD = "http://127.0.0.1:9/v1"  # nothing listens there: a case that reached a call would fail differently

ROW = {
    "id": "q1",
    "question": "Which drug treats condition X?",
    "answer": "A",
    "opa": "Drug A",
    "opb": "Drug B",
    "opc": "Drug C",
}
ROW2 = {**ROW, "id": "q2"}

HC_ROW = {
    "instance_id": "1-a-b",
    "topic_id": 1,
    "query": "Can X help?",
    "query_stance": "yes",
    "doc_a": "A",
    "doc_b": "B",
}
TJ_ROW = {"id": "t1", "title": "A paper", "isimpact": "yes", "conclusion": "C", "problem": "P", "note": "N"}
MMB_RUN = ["bench", "run", "medmisbench", "--model", "m", "--base-url", DEAD, "--no-progress"]
TROJAN_RUN = ["bench", "run", "trojan", "--model", "m", "--base-url", DEAD, "--judge-model", "j", "--no-progress"]


def jsonl(rows: list[dict | str]) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows).encode()


def jsonl_encoding_cases(
    prefix: str, command: Callable[[Callable[[Path], str]], Callable[[Path], list[str]]], name: str, row: dict
) -> list[Case]:
    """A JSONL data file's byte-level faults (a Latin-1 byte, a NUL, a byte-order mark), each named by line."""

    def data(tail: bytes, head: bytes = b"") -> Callable[[Path], str]:
        return lambda w: write(w / name, head + jsonl([row]) + tail)

    return [
        Case(f"{prefix}-latin1", command(data(b'{"id": "caf\xe9"}\n')), (f"{name}:2", "UTF-8")),
        Case(f"{prefix}-nul", command(data(b'{"id": "q\x002"}\n')), (f"{name}:2", "NUL")),
        Case(f"{prefix}-bom", command(data(b"", b"\xef\xbb\xbf")), (f"{name}:1", "byte-order")),
    ]


def csv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def parquet(path: Path, rows: list[dict]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def folder(path: Path) -> str:
    path.mkdir(parents=True)
    (path / "inside.txt").write_text("x", encoding="utf-8")
    return str(path)


def mmb(data: Callable[[Path], str], *extra: str, out: str = "run") -> Callable[[Path], list[str]]:
    """``bench run medmisbench`` on the file ``data`` writes, into ``out`` below the case folder."""
    return lambda w: [*MMB_RUN, "--data", data(w), "--out", str(w / out), *extra]


def old_run(w: Path, name: str = "old") -> Path:
    """A copy of the committed MedMisBench run (a run directory of the benchmark every other one is not)."""
    target = w / name
    shutil.copytree(DATA / "medmisbench_old_run", target)
    (target / "expected_report.json").unlink()
    return target

