"""Bad-input corpus of the benchmark and statistics commands: every case refused cleanly.

Each case asserts (``corpus.check``): the exit code (2 bad input, 1 a fault of the machine), no traceback,
the message names the file and line (where there is one), and the case folder is unchanged: a refused
command writes nothing and leaves no directory behind. Families: benchmark files of every source format
(JSONL, JSON, CSV, Parquet) for each ``bench`` command that reads one, arguments checked before anything is
written, run directories (another benchmark's, a busy one, damaged results), and ``stats`` inputs.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bad_inputs.corpus import MACHINE, Case, check, write
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


# -- medmisbench data files ----------------------------------------------------------------------

MMB_RUN = ["bench", "run", "medmisbench", "--model", "m", "--base-url", DEAD, "--no-progress"]


def mmb(data: Callable[[Path], str], *extra: str, out: str = "run") -> Callable[[Path], list[str]]:
    return lambda w: [*MMB_RUN, "--data", data(w), "--out", str(w / out), *extra]


def strict(make: Callable[[Path], list[str]]) -> Callable[[Path], list[str]]:
    """medrev's own reading: rows the authors' notebook evaluates anyway (a gold answer that is no option) refused."""
    return lambda w: [*make(w), "--protocol", "strict"]


MMB_FILES: list[Case] = [
    *jsonl_encoding_cases("mmb", mmb, "a.jsonl", ROW),
    Case(
        "mmb-5mb-line",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, {**ROW2, "question": "x" * 5_000_000}]))),
        ("a.jsonl:2", "MB"),
    ),
    Case("mmb-fifo", mmb(lambda w: fifo(w / "a.jsonl")), ("a.jsonl", "named pipe")),
    Case(
        "mmb-folder-named-like-a-file",
        mmb(lambda w: folder(w / "data" / "MEDMISQA.jsonl").rsplit("/", 1)[0]),
        ("data", "holds no"),
    ),
    Case("mmb-empty-folder", mmb(lambda w: str((w / "empty").mkdir() or w / "empty")), ("empty", "holds no")),
    Case("mmb-missing", mmb(lambda w: str(w / "nope.jsonl")), ("nope.jsonl", "no such")),
    Case("mmb-empty-file", mmb(lambda w: write(w / "a.jsonl", b"")), ("a.jsonl",)),
    Case("mmb-only-blank-lines", mmb(lambda w: write(w / "a.jsonl", b"\n\n  \n")), ("a.jsonl",)),
    Case(
        "mmb-malformed-middle",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, '{"id": "q2",', ROW2]))),
        ("a.jsonl:2", "malformed JSON"),
    ),
    Case("mmb-not-object", mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, "[1, 2]"]))), ("a.jsonl:2", "object")),
    Case(
        "mmb-list-cell",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, {**ROW2, "opa": ["Discharge", "home"]}]))),
        ("a.jsonl:2", "'opa'", "a list"),
    ),
    Case(
        "mmb-object-id",
        mmb(lambda w: write(w / "a.jsonl", jsonl([{**ROW, "id": {"x": 1}}]))),
        ("a.jsonl:1", "'id'", "an object"),
    ),
    Case(
        "mmb-missing-answer",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, {**ROW2, "answer": ""}])))),
        ("a.jsonl:2", "answer"),
    ),
    Case(
        "mmb-gold-not-option",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, {**ROW2, "answer": "F"}])))),
        ("a.jsonl:2", "answer"),
    ),
    Case("mmb-duplicate-id", mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, ROW]))), ("a.jsonl:2", "duplicate")),
    Case(
        "mmb-no-question",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([{k: v for k, v in ROW.items() if k != "question"}])))),
        ("a.jsonl:1", "question"),
    ),
    Case(
        "mmb-one-bad-row-of-three",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, ROW2, {**ROW, "id": "q3", "answer": "Z"}])))),
        ("a.jsonl:3", "nothing was loaded"),
    ),
    Case(
        "mmb-25-bad-rows",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([{**ROW, "id": f"q{i}", "answer": "Z"} for i in range(25)])))),
        ("25 problems", "a.jsonl:20", "and 5 more"),
    ),
    Case("mmb-unsupported-suffix", mmb(lambda w: write(w / "a.txt", jsonl([ROW]))), ("a.txt", "unsupported")),
    Case(
        "mmb-markup-in-name",
        strict(mmb(lambda w: write(w / "MEDMISQA [v2].jsonl", jsonl([ROW, {**ROW2, "answer": "Z"}])))),
        ("MEDMISQA [v2].jsonl:2",),
    ),
    Case(
        "mmb-markup-in-cell",
        strict(mmb(lambda w: write(w / "a.jsonl", jsonl([{**ROW, "answer": "[/b]"}])))),
        ("a.jsonl:1", "[/b]"),
    ),
    Case(
        "mmb-json-array-bad-record",
        mmb(lambda w: write(w / "a.json", json.dumps([ROW, 5]).encode())),
        ("a.json:2", "not a JSON object"),
    ),
    Case(
        "mmb-json-malformed",
        mmb(lambda w: write(w / "a.json", b'[{"id": "q1",\n "question": }]')),
        ("a.json:2", "malformed"),
    ),
    Case("mmb-json-latin1", mmb(lambda w: write(w / "a.json", b'[\n{"id": "caf\xe9"}\n]')), ("a.json:2", "UTF-8")),
    Case("mmb-json-scalar", mmb(lambda w: write(w / "a.json", b"42")), ("a.json", "array")),
    Case(
        "mmb-csv-extra-cells",
        mmb(lambda w: write(w / "a.csv", csv_bytes(list(ROW), [list(ROW.values()), [*ROW2.values(), "x"]]))),
        ("a.csv:3", "more cells"),
    ),
    Case(
        "mmb-csv-latin1",
        mmb(lambda w: write(w / "a.csv", csv_bytes(list(ROW), [list(ROW.values())]) + b"q2,caf\xe9,A,x,y,z\n")),
        ("a.csv:3", "UTF-8"),
    ),
    Case(
        "mmb-csv-bom",
        mmb(lambda w: write(w / "a.csv", b"\xef\xbb\xbf" + csv_bytes(list(ROW), [list(ROW.values())]))),
        ("a.csv:1", "byte-order"),
    ),
    Case(
        "mmb-csv-nul",
        mmb(lambda w: write(w / "a.csv", csv_bytes(list(ROW), [list(ROW.values())]) + b"q2,\x00,A,x,y,z\n")),
        ("a.csv:3", "NUL"),
    ),
    Case("mmb-csv-empty", mmb(lambda w: write(w / "a.csv", b"")), ("a.csv", "empty")),
    Case(
        "mmb-csv-bad-gold",
        strict(
            mmb(
                lambda w: write(
                    w / "a.csv", csv_bytes(list(ROW), [list(ROW.values()), ["q2", "Q?", "Q", "x", "y", "z"]])
                )
            )
        ),
        ("a.csv:3", "answer"),
    ),
    Case("mmb-parquet-corrupt", mmb(lambda w: write(w / "a.parquet", b"PAR1 not really")), ("a.parquet", "Parquet")),
    Case(
        "mmb-parquet-list-cell",
        mmb(
            lambda w: (
                parquet(w / "a.parquet", [{**ROW, "opa": "x"}, {**ROW2, "opa": "y"}])
                and (pq_list := w / "b.parquet")
                and parquet(pq_list, [{**ROW, "opb": ["p", "q"]}])
            )
        ),
        ("b.parquet:1", "'opb'", "a list"),
    ),
    Case(
        "mmb-parquet-bad-gold",
        strict(mmb(lambda w: parquet(w / "a.parquet", [ROW, {**ROW2, "answer": "Q"}]))),
        ("a.parquet:2", "answer"),
    ),
    Case(
        "mmb-folder-with-bad-file",
        mmb(
            lambda w: (
                write(w / "d" / "MEDMISQA.jsonl", jsonl([ROW])),
                write(w / "d" / "MEDMISHLE.jsonl", jsonl([ROW, "{"])),
            )[0].rsplit("/", 1)[0]
        ),
        ("MEDMISHLE.jsonl:2",),
    ),
    Case(
        "mmb-authors-latin1",
        mmb(lambda w: write(w / "a.jsonl", b'{"id": "q\xe9"}\n'), "--protocol", "authors"),
        ("a.jsonl:1", "UTF-8"),
    ),
    Case(
        "mmb-template-file-missing",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])), "--template-file", "nope.json"),
        ("nope.json",),
    ),
    Case(
        "mmb-template-file-folder",
        lambda w: [*mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])))(w), "--template-file", folder(w / "tpl")],
        ("tpl",),
    ),
    Case(
        "mmb-template-file-malformed",
        lambda w: [
            *mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])))(w),
            "--template-file",
            write(w / "t.json", b"{nope"),
        ],
        ("t.json",),
    ),
]


# One cell check for every reader of the released format (``data.check_cells``): refused under the default
# (authors) protocol as under strict, and by ``review import`` (tests/bad_inputs/test_review_bad_inputs.py).
INJECTED = {
    **ROW2,
    "injecta": "Drug A is right.",
    "injectb": "Drug B is right.",
    "injectc": "Drug C is right.",
    "injection_content": "Cue Remapping",
    "injection_provenance": "Neutral False Statement",
}
ONE_ROW_CHECK: list[tuple[str, dict, tuple[str, ...]]] = [
    ("list-question", {**ROW2, "question": ["Which drug?", "Pick one"]}, ("'question'", "a list")),
    ("object-extra-column", {**ROW2, "notes": {"by": "x"}}, ("'notes'", "an object")),
    ("markup-content", {**INJECTED, "injection_content": "[b]Cue Remapping[/b]"}, ("'injection_content'", "markup")),
    ("markup-content-folded", {**INJECTED, "injection_content": "Cue Remapping[/]"}, ("'injection_content'", "[/]")),
    ("markup-provenance-html", {**INJECTED, "injection_provenance": "<i>Neutral</i>"}, ("'injection_provenance'",)),
    ("markdown-content", {**INJECTED, "injection_content": "**Cue Remapping**"}, ("'injection_content'", "*")),
    ("markup-answer", {**ROW2, "answer": "[bold]A[/bold]"}, ("'answer'", "carries markup ([bold])")),
    ("markup-subset", {**ROW2, "subset": "[red]MEDMISQA[/red]"}, ("'subset'", "markup")),
]
for _name, _row, _mentions in ONE_ROW_CHECK:
    for _protocol in ("authors", "strict"):
        MMB_FILES.append(
            Case(
                f"mmb-{_name}-{_protocol}",
                mmb(lambda w, row=_row: write(w / "a.jsonl", jsonl([ROW, row])), "--protocol", _protocol),
                ("a.jsonl:2", *_mentions),
            )
        )
MMB_FILES += [
    Case(
        "mmb-csv-markup-content",
        mmb(
            lambda w: write(
                w / "a.csv",
                csv_bytes(list(INJECTED), [list(INJECTED.values()), [*list(INJECTED.values())[:-2], "[i]x[/i]", "n"]]),
            )
        ),
        ("a.csv:3", "'injection_content'", "markup"),
    ),
    Case(
        "mmb-parquet-list-question",
        mmb(lambda w: parquet(w / "a.parquet", [{**ROW, "question": ["Which?"]}, {**ROW2, "question": ["x", "y"]}])),
        ("a.parquet:1", "a.parquet:2", "'question'", "a list"),
    ),
]

# -- arguments: checked before anything is written -----------------------------------------------


def mmb_args(*extra: str, out: str = "run") -> Callable[[Path], list[str]]:
    return mmb(lambda w: write(w / "a.jsonl", jsonl([ROW, ROW2])), *extra, out=out)


def mmb_base(base_url: str) -> Callable[[Path], list[str]]:
    def make(w: Path) -> list[str]:
        argv = mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])))(w)
        argv[argv.index(DEAD)] = base_url
        return argv

    return make


ARGUMENTS: list[Case] = [
    Case("arg-provider", mmb_args("--provider", "openia"), ("--provider", "openia")),
    Case("arg-tools-unknown", mmb_args("--tools", "bing"), ("--tools", "bing")),
    Case(
        "arg-tools-local-missing", mmb_args("--tools", "local:/nonexistent/folder"), ("--tools", "/nonexistent/folder")
    ),
    Case("arg-tools-local-empty", mmb_args("--tools", "local:"), ("--tools",)),
    Case("arg-base-url-word", mmb_base("nope"), ("--base-url", "nope")),
    Case("arg-base-url-ftp", mmb_base("ftp://host/v1"), ("--base-url", "ftp://host/v1")),
    Case("arg-base-url-no-host", mmb_base("http:///v1"), ("--base-url",)),
    Case("arg-base-url-bad-port", mmb_base("http://host:port/v1"), ("--base-url",)),
    Case("arg-timeout-zero", mmb_args("--timeout", "0"), ("--timeout",)),
    Case("arg-timeout-negative", mmb_args("--timeout", "-5"), ("--timeout",)),
    Case("arg-timeout-text", mmb_args("--timeout", "soon"), ("--timeout",)),
    Case("arg-temperature-negative", mmb_args("--temperature", "-1"), ("--temperature",)),
    Case("arg-max-tokens-negative", mmb_args("--max-tokens", "-5"), ("--max-tokens",)),
    Case("arg-max-tokens-zero", mmb_args("--max-tokens", "0"), ("--max-tokens",)),
    Case("arg-concurrency-zero", mmb_args("--concurrency", "0"), ("--concurrency",)),
    Case("arg-max-total-negative", mmb_args("--max-total", "-1"), ("--max-total",)),
    Case("arg-backoff-negative", mmb_args("--backoff", "-1"), ("--backoff",)),
    Case("arg-limit-zero", mmb_args("--limit", "0"), ("--limit",)),
    Case("arg-conditions", mmb_args("--conditions", "clean,type9"), ("type9",)),
    Case("arg-protocol", mmb_args("--protocol", "lenient"), ("lenient",)),
    Case("arg-template", mmb_args("--template", "nosuch@9"), ("nosuch@9",)),
    Case("arg-request-profile", mmb_args("--request-profile", "quantum"), ("quantum",)),
    Case("arg-thinking", mmb_args("--thinking", "maybe"), ("maybe",)),
    Case("arg-time-budget-zero", mmb_args("--tools", "web", "--time-budget", "0"), ("--time-budget",)),
    Case("arg-unknown-option", mmb_args("--temprature", "0"), ("--temprature",)),
    Case(
        "arg-out-is-a-file",
        lambda w: mmb_args(out="file.txt")(w) if write(w / "file.txt", "x") else [],
        ("file.txt", "is a file"),
    ),
]


# -- run directories -----------------------------------------------------------------------------


def old_run(w: Path, name: str = "old") -> Path:
    target = w / name
    shutil.copytree(DATA / "medmisbench_old_run", target)
    (target / "expected_report.json").unlink()
    return target


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
def _release_held_locks():
    yield
    while _HELD_LOCKS:
        os.close(_HELD_LOCKS.pop())


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
    Case("compare-missing", lambda w: ["bench", "compare", str(w / "a"), str(w / "b")], ("a",)),
    Case("compare-not-runs", lambda w: ["bench", "compare", folder(w / "a"), folder(w / "b")], ("a",)),
    Case("compare-runs-missing", lambda w: ["bench", "compare-runs", str(w / "a"), str(w / "b")], ("a",)),
    Case("generate-report-missing", lambda w: ["bench", "generate-report", str(w / "nope")], ("nope",)),
    Case("generate-report-not-generation", lambda w: ["bench", "generate-report", str(old_run(w))], ("old",)),
    Case(
        "regenerate-from-missing",
        lambda w: [
            "bench",
            "regenerate",
            "--from",
            str(w / "nope"),
            "--out",
            str(w / "o"),
            "--model",
            "m",
            "--base-url",
            DEAD,
        ],
        ("nope",),
    ),
    Case(
        "reassign-from-not-generation",
        lambda w: [
            "bench",
            "reassign-provenance",
            "--from",
            str(old_run(w)),
            "--out",
            str(w / "o"),
            "--model",
            "m",
            "--base-url",
            DEAD,
        ],
        ("old",),
    ),
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


SENSITIVITY = ["--model", "g", "--base-url", DEAD, "--no-progress"]
RUN_DIRS += [
    Case(
        "regenerate-provider",
        lambda w: [
            "bench",
            "regenerate",
            "--from",
            str(old_run(w)),
            "--out",
            str(w / "o"),
            *SENSITIVITY,
            "--provider",
            "acme",
        ],
        ("--provider", "acme"),
    ),
    Case(
        "reassign-temperature",
        lambda w: [
            "bench",
            "reassign-provenance",
            "--from",
            str(old_run(w)),
            "--out",
            str(w / "o"),
            *SENSITIVITY,
            "--temperature",
            "-3",
        ],
        ("--temperature",),
    ),
    Case(
        "regenerate-out-is-a-run-dir",
        lambda w: ["bench", "regenerate", "--from", str(old_run(w)), "--out", str(old_run(w, "other")), *SENSITIVITY],
        ("other", "medmisbench"),
    ),
]


# -- healthcontradict ----------------------------------------------------------------------------

HC_ROW = {
    "instance_id": "1-a-b",
    "topic_id": 1,
    "query": "Can X help?",
    "query_stance": "yes",
    "doc_a": "A",
    "doc_b": "B",
}
QUERY = {"topic_id": 1, "description": "Can cranberries prevent UTIs?", "query_stance": "no"}


def hc(data: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: [
        "bench",
        "run",
        "healthcontradict",
        "--data",
        data(w),
        "--model",
        "m",
        "--out",
        str(w / "run"),
        "--no-progress",
        *(extra if "--hf" in extra or "--base-url" in extra else ("--base-url", DEAD, *extra)),
    ]


HEALTHCONTRADICT: list[Case] = [
    *jsonl_encoding_cases("hc", hc, "i.jsonl", HC_ROW),
    Case(
        "hc-missing-query",
        hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW, {**HC_ROW, "instance_id": "2", "query": ""}]))),
        ("i.jsonl:2", "query"),
    ),
    Case(
        "hc-bad-stance",
        hc(lambda w: write(w / "i.jsonl", jsonl([{**HC_ROW, "query_stance": "maybe"}]))),
        ("i.jsonl:1",),
    ),
    Case(
        "hc-list-stance",
        hc(lambda w: write(w / "i.jsonl", jsonl([{**HC_ROW, "query_stance": ["yes"]}]))),
        ("i.jsonl:1", "query_stance"),
    ),
    Case(
        "hc-object-instance-id",
        hc(lambda w: write(w / "i.jsonl", jsonl([{**HC_ROW, "instance_id": {"a": 1}}]))),
        ("i.jsonl:1", "instance_id"),
    ),
    Case(
        "hc-queries-latin1",
        hc(lambda w: write(w / "q.jsonl", jsonl([QUERY]) + b'{"description": "\xe9"}\n'), "--templates", "NC"),
        ("q.jsonl:2", "UTF-8"),
    ),
    Case(
        "hc-queries-bad-topic",
        hc(lambda w: write(w / "q.jsonl", jsonl([QUERY, {**QUERY, "topic_id": "x"}])), "--templates", "NC"),
        ("q.jsonl:2", "topic_id"),
    ),
    Case("hc-data-fifo", hc(lambda w: fifo(w / "q.jsonl"), "--templates", "NC"), ("q.jsonl", "named pipe")),
    Case(
        "hc-queries-fifo",
        lambda w: hc(lambda w: folder(w / "d"), "--queries", fifo(w / "q.jsonl"))(w),
        ("q.jsonl", "named pipe"),
    ),
    Case(
        "hc-documents-folder",
        lambda w: hc(lambda w: write(w / "q.jsonl", jsonl([QUERY])), "--documents", folder(w / "docs.csv"))(w),
        ("docs.csv", "folder"),
    ),
    Case(
        "hc-pairs-csv-nul",
        lambda w: hc(
            lambda w: folder(w / "d"),
            "--queries",
            write(w / "q.jsonl", jsonl([QUERY])),
            "--templates",
            "NC",
            "--pairs",
            write(w / "p.csv", b"topic_id,doc1_id,doc2_id\n1,a,\x00\n"),
        )(w),
        ("p.csv:2", "NUL"),
    ),
    Case("hc-missing-data", hc(lambda w: str(w / "nope")), ("nope",)),
    Case(
        "hc-both-endpoints",
        hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--base-url", DEAD, "--hf", "/nonexistent"),
        ("--base-url",),
    ),
    Case("hc-templates", hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--templates", "NC,XX"), ("XX",)),
    Case(
        "hc-provider", hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--provider", "acme"), ("--provider", "acme")
    ),
    Case(
        "hc-temperature", hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--temperature", "-1"), ("--temperature",)
    ),
    Case("hc-timeout", hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--timeout", "0"), ("--timeout",)),
    Case(
        "hc-top-logprobs",
        hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--top-logprobs", "50"),
        ("--top-logprobs",),
    ),
    Case(
        "hc-hf-missing-folder",
        hc(lambda w: write(w / "i.jsonl", jsonl([HC_ROW])), "--hf", str(Path("/nonexistent/model"))),
        ("/nonexistent/model",),
        needs=("torch", "transformers"),  # without the hf extra the command stops at that, before the folder
    ),
]


# -- trojan --------------------------------------------------------------------------------------

TJ_ROW = {"id": "t1", "title": "A paper", "isimpact": "yes", "conclusion": "C", "problem": "P", "note": "N"}
TROJAN_RUN = ["bench", "run", "trojan", "--model", "m", "--base-url", DEAD, "--judge-model", "j", "--no-progress"]


def tj(content: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: [*TROJAN_RUN, "--data", content(w), "--out", str(w / "run"), *extra]


def ingest(content: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: ["bench", "ingest", "trojan", "--data", content(w), "--out", str(w / "records.json"), *extra]


TROJAN: list[Case] = [
    # a missing comma: every Python places it on line 3 (a trailing comma is line 3 before 3.13, 2 after)
    Case("tj-malformed", tj(lambda w: write(w / "t.json", '[\n{"id": "t1"\n"title": "x"}\n]')), ("t.json:3",)),
    Case("tj-latin1", tj(lambda w: write(w / "t.json", b'[\n{"id": "t\xe9"}\n]')), ("t.json:2", "UTF-8")),
    Case("tj-nul", tj(lambda w: write(w / "t.json", b'[\n{"id": "t\x00"}\n]')), ("t.json:2", "NUL")),
    Case(
        "tj-bom",
        tj(lambda w: write(w / "t.json", b"\xef\xbb\xbf" + json.dumps([TJ_ROW]).encode())),
        ("t.json:1", "byte-order"),
    ),
    Case("tj-empty-array", tj(lambda w: write(w / "t.json", "[]")), ("t.json", "no record")),
    Case(
        "tj-missing-field",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW, {**TJ_ROW, "id": "t2", "title": ""}]))),
        ("t.json", "records[1]", "title"),
    ),
    Case(
        "tj-bad-isimpact",
        tj(lambda w: write(w / "t.json", json.dumps([{**TJ_ROW, "isimpact": "perhaps"}]))),
        ("t.json", "isimpact"),
    ),
    Case(
        "tj-list-title",
        tj(lambda w: write(w / "t.json", json.dumps([{**TJ_ROW, "title": ["a", "b"]}]))),
        ("t.json", "title"),
    ),
    Case("tj-duplicate-id", tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW, TJ_ROW]))), ("t.json", "duplicate")),
    Case("tj-scalar", tj(lambda w: write(w / "t.json", "17")), ("t.json", "array")),
    Case("tj-folder", tj(lambda w: folder(w / "t.json")), ("t.json", "folder")),
    Case("tj-fifo", tj(lambda w: fifo(w / "t.json")), ("t.json", "named pipe")),
    Case(
        "tj-expect-count",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--expect-count", "2"),
        ("t.json", "expected 2"),
    ),
    Case(
        "tj-judge-provider",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--judge-provider", "acme"),
        ("--provider", "acme"),
    ),
    Case(
        "tj-judge-base-url",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--judge-base-url", "judge"),
        ("--base-url", "judge"),
    ),
    Case(
        "tj-judge-temperature",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--judge-temperature", "-2"),
        ("--judge-temperature",),
    ),
    Case(
        "tj-max-tokens",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--max-tokens", "-5"),
        ("--max-tokens",),
    ),
    Case("ingest-latin1", ingest(lambda w: write(w / "t.json", b'[\n{"id": "t\xe9"}\n]')), ("t.json:2", "UTF-8")),
    Case(
        "ingest-missing-field",
        ingest(lambda w: write(w / "t.json", json.dumps([{**TJ_ROW, "note": None}]))),
        ("t.json", "note"),
    ),
    Case(
        "ingest-default-isimpact",
        ingest(
            lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--fallback", "rw", "--default-isimpact", "perhaps"
        ),
        ("perhaps",),
    ),
    Case(
        "ingest-out-is-folder",
        lambda w: [
            "bench",
            "ingest",
            "trojan",
            "--data",
            write(w / "t.json", json.dumps([TJ_ROW])),
            "--out",
            folder(w / "out.json"),
        ],
        ("out.json",),
    ),
    Case(
        "ingest-fallback-csv-latin1",
        ingest(lambda w: write(w / "t.csv", b"Title,Reason\nA,caf\xe9\n"), "--fallback", "retraction-watch"),
        ("t.csv:2", "UTF-8"),
    ),
    Case(
        "ingest-fallback-jsonl-malformed",
        ingest(lambda w: write(w / "t.jsonl", jsonl([TJ_ROW, "{nope"])), "--fallback", "retraction-watch"),
        ("t.jsonl:2",),
    ),
    Case("ingest-missing", ingest(lambda w: str(w / "nope.json")), ("nope.json",)),
    Case(
        "ingest-retrieved-at-words",
        ingest(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--retrieved-at", "last tuesday"),
        ("--retrieved-at", "ISO 8601", "'last tuesday'"),
    ),
    Case(
        "ingest-retrieved-at-impossible-day",
        ingest(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--retrieved-at", "2026-02-30"),
        ("--retrieved-at", "'2026-02-30'"),
    ),
    Case(
        "ingest-generated-at-words",
        ingest(
            lambda w: write(w / "t.json", json.dumps({"generated_at": "last tuesday", "records": [TJ_ROW]}, indent=2))
        ),
        ("t.json:2", "'generated_at'", "ISO 8601", "'last tuesday'"),
    ),
    Case(
        "ingest-fallback-retrieved-at-words",
        ingest(
            lambda w: write(w / "t.csv", "Title,Reason,conclusion\nA,B,C\n"),
            "--fallback",
            "retraction-watch",
            "--problem-from-conclusion",
            "--retrieved-at",
            "next week",
        ),
        ("--retrieved-at", "'next week'"),
    ),
    Case(
        "tj-retrieved-at-words",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW])), "--retrieved-at", "yesterday"),
        ("--retrieved-at", "'yesterday'"),
    ),
    Case(
        "tj-generated-at-words",
        tj(lambda w: write(w / "t.json", json.dumps({"records": [TJ_ROW], "generated_at": "soon"}, indent=1))),
        ("t.json:12", "'generated_at'", "'soon'"),
    ),
    Case(
        "tj-missing-field-names-its-line",
        tj(lambda w: write(w / "t.json", json.dumps([TJ_ROW, {**TJ_ROW, "id": "t2", "problem": ""}], indent=1))),
        ("t.json:10", "'problem'", "records[1]"),
    ),
    Case(
        "ingest-fallback-jsonl-missing-field-line",
        ingest(
            lambda w: write(w / "t.jsonl", jsonl([{"title": "A", "conclusion": "C"}, {"conclusion": "D"}])),
            "--fallback",
            "retraction-watch",
            "--problem-from-conclusion",
        ),
        ("t.jsonl:2", "'id'"),
    ),
]


# -- bench generate: every source format ---------------------------------------------------------

MEDQA = {"question": "Which?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}
MEDMCQA = {"id": "m1", "question": "Which?", "opa": "x", "opb": "y", "opc": "z", "opd": "w", "cop": 1}


def gen(fmt: str, content: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: [
        "bench",
        "generate",
        "--source",
        content(w),
        "--format",
        fmt,
        "--model",
        "g",
        "--base-url",
        DEAD,
        "--out",
        str(w / "gen"),
        "--no-progress",
        *extra,
    ]


GENERATE: list[Case] = [
    Case(
        "gen-medqa-latin1",
        gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA]) + b'{"question": "\xe9"}\n')),
        ("s.jsonl:2", "UTF-8"),
    ),
    Case(
        "gen-medqa-bad-row",
        gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA, {**MEDQA, "answer_idx": "F"}]))),
        ("s.jsonl:2", "nothing was loaded"),
    ),
    Case(
        "gen-medqa-list-answer",
        gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA, {**MEDQA, "answer_idx": ["A"]}]))),
        ("s.jsonl:2", "answer_idx"),
    ),
    Case(
        "gen-medmcqa-csv-latin1",
        gen(
            "medmcqa",
            lambda w: write(
                w / "s.csv", csv_bytes(list(MEDMCQA), [[str(v) for v in MEDMCQA.values()]]) + b"m2,\xe9,x,y,z,w,1\n"
            ),
        ),
        ("s.csv:3", "UTF-8"),
    ),
    Case(
        "gen-medmcqa-bad-cop",
        gen("medmcqa", lambda w: write(w / "s.jsonl", jsonl([MEDMCQA, {**MEDMCQA, "id": "m2", "cop": 9}]))),
        ("s.jsonl:2", "cop"),
    ),
    Case(
        "gen-medxpertqa-nul",
        gen("medxpertqa", lambda w: write(w / "s.jsonl", b'{"question": "\x00"}\n')),
        ("s.jsonl:1", "NUL"),
    ),
    Case(
        "gen-medjourney-bom",
        gen("medjourney", lambda w: write(w / "s.jsonl", b"\xef\xbb\xbf{}\n")),
        ("s.jsonl:1", "byte-order"),
    ),
    Case("gen-hle-fifo", gen("hle", lambda w: fifo(w / "s.jsonl")), ("s.jsonl", "named pipe")),
    Case(
        "gen-medrev-object-id",
        gen("medrev", lambda w: write(w / "s.jsonl", jsonl([{**ROW, "id": {"a": 1}}]))),
        ("s.jsonl:1", "'id'"),
    ),
    Case("gen-unknown-format", gen("medqb", lambda w: write(w / "s.jsonl", jsonl([MEDQA]))), ("medqb",)),
    Case("gen-cop-base", gen("medmcqa", lambda w: write(w / "s.jsonl", jsonl([MEDMCQA])), "--cop-base", "5"), ("cop",)),
    Case(
        "gen-provenance",
        gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])), "--provenance", "skewed"),
        ("skewed",),
    ),
    Case(
        "gen-structured", gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])), "--structured", "xml"), ("xml",)
    ),
    Case(
        "gen-provider", gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])), "--provider", "x"), ("--provider",)
    ),
    Case(
        "gen-base-url",
        lambda w: [
            a if a != DEAD else "localhost:8000"
            for a in gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])))(w)
        ],
        ("--base-url",),
    ),
    Case(
        "gen-temperature",
        gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])), "--temperature", "-1"),
        ("--temperature",),
    ),
    Case(
        "gen-out-is-run-dir",
        lambda w: [*gen("medqa", lambda w: write(w / "s.jsonl", jsonl([MEDQA])))(w), "--out", str(old_run(w))],
        ("old", "medmisbench"),
    ),
    Case("gen-source-missing", gen("medqa", lambda w: str(w / "nope.jsonl")), ("nope.jsonl",)),
]


# -- stats ---------------------------------------------------------------------------------------

AGREE_HEADER = "unit,rater,score\n"
AGREE_COLUMNS = ("--score", "score", "--unit", "unit", "--rater", "rater")


def agreement(content: bytes | str, *extra: str, name: str = "r.csv") -> Callable[[Path], list[str]]:
    return lambda w: [
        "stats",
        "agreement",
        "--input",
        write(w / name, content),
        "--score",
        "score",
        "--unit",
        "unit",
        "--rater",
        "rater",
        *extra,
    ]


def harm(content: bytes | str, *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: [
        "stats",
        "harm-model",
        "--input",
        write(w / "h.csv", content),
        "--outcome",
        "harm",
        "--fixed",
        "model",
        "--group",
        "reviewer",
        *extra,
    ]


HARM_ROWS = "".join(f"{i % 2},{'a' if i % 3 else 'b'},r{i % 4}\n" for i in range(40))

STATS: list[Case] = [
    Case("stats-agreement-text-score", agreement(AGREE_HEADER + "1,a,1\n1,b,2\n2,a,high\n"), ("r.csv", "line 4")),
    Case("stats-agreement-score-outside", agreement(AGREE_HEADER + "1,a,1\n1,b,7\n"), ("r.csv", "line 3")),
    Case("stats-agreement-blank-lines", agreement(AGREE_HEADER + "1,a,1\n\n\n1,b,x\n"), ("r.csv", "line 5")),
    Case("stats-agreement-latin1", agreement(AGREE_HEADER.encode() + b"1,\xe9,1\n"), ("r.csv:2", "UTF-8")),
    Case("stats-agreement-nul", agreement(AGREE_HEADER.encode() + b"1,a,\x00\n"), ("r.csv:2", "NUL")),
    Case(
        "stats-agreement-bom",
        agreement(b"\xef\xbb\xbf" + AGREE_HEADER.encode() + b"1,a,1\n"),
        ("r.csv:1", "byte-order"),
    ),
    Case("stats-agreement-empty", agreement(""), ("r.csv", "empty")),
    Case("stats-agreement-header-only", agreement(AGREE_HEADER), ("r.csv", "no data rows")),
    Case("stats-harm-header-only", harm("harm,model,reviewer\n\n"), ("h.csv", "no data rows")),
    Case(
        "report-out-below-a-file",
        lambda w: ["bench", "report", str(old_run(w)), "--out", str(Path(write(w / "f.txt", "x")) / "sub")],
        ("f.txt is a file",),
    ),
    Case("stats-agreement-missing-column", agreement("unit,rater\n1,a\n"), ("r.csv", "score")),
    Case("stats-agreement-no-unit", agreement(AGREE_HEADER + "1,a,1\n,b,2\n"), ("r.csv", "column 'unit'", "line 3")),
    Case(
        "stats-agreement-no-rater",
        agreement(AGREE_HEADER + "1,a,1\n\n2,,2\n"),
        ("r.csv", "column 'rater'", "line 4"),
    ),
    Case(
        "stats-agreement-rated-twice",
        agreement(AGREE_HEADER + "1,a,1\n1,b,2\n1,a,0\n"),
        ("r.csv", "column 'score'", "line 4", "first at line 2"),
    ),
    Case("stats-agreement-weights", agreement(AGREE_HEADER + "1,a,1\n", "--weights", "cubic"), ("cubic",)),
    Case(
        "stats-agreement-categories", agreement(AGREE_HEADER + "1,a,1\n", "--categories", "0,one,2"), ("--categories",)
    ),
    Case(
        "stats-agreement-missing",
        lambda w: ["stats", "agreement", "--input", str(w / "nope.csv"), *AGREE_COLUMNS],
        ("nope.csv",),
    ),
    Case(
        "stats-agreement-folder",
        lambda w: ["stats", "agreement", "--input", folder(w / "d.csv"), *AGREE_COLUMNS],
        ("d.csv",),
    ),
    Case(
        "stats-agreement-fifo",
        lambda w: ["stats", "agreement", "--input", fifo(w / "p.csv"), *AGREE_COLUMNS],
        ("p.csv", "named pipe"),
    ),
    Case("stats-harm-line-5", harm("harm,model,reviewer\n0,a,r1\n1,b,r2\n\n2,a,r3\n" + HARM_ROWS), ("h.csv", "line 5")),
    Case(
        "stats-harm-quoted-newline",
        harm('harm,model,reviewer\n0,"a\nb",r1\n1,b,r2\nmaybe,a,r3\n' + HARM_ROWS),
        ("h.csv", "line 5"),
    ),
    Case("stats-harm-missing-column", harm("harm,model\n0,a\n"), ("h.csv", "reviewer")),
    Case("stats-harm-reference", harm("harm,model,reviewer\n" + HARM_ROWS, "--reference", "model"), ("--reference",)),
    Case("stats-harm-reference-level", harm("harm,model,reviewer\n" + HARM_ROWS, "--reference", "model=zzz"), ("zzz",)),
    Case("stats-harm-penalty", harm("harm,model,reviewer\n" + HARM_ROWS, "--penalty", "lasso"), ("--penalty",)),
    Case("stats-harm-latin1", harm(b"harm,model,reviewer\n0,\xe9,r1\n"), ("h.csv:2", "UTF-8")),
    Case("stats-harm-bom", harm(b"\xef\xbb\xbfharm,model,reviewer\n0,a,r1\n"), ("h.csv:1", "byte-order")),
    Case("stats-harm-5mb-line", harm("harm,model,reviewer\n0,a," + "r" * 5_000_000 + "\n"), ("h.csv:2", "MB")),
    Case("stats-proportion-k-gt-n", lambda w: ["stats", "proportion", "--successes", "5", "--n", "3"], ("5",)),
    Case("stats-proportion-negative", lambda w: ["stats", "proportion", "--successes", "-1", "--n", "3"], ("-1",)),
    Case(
        "stats-plan-pilot-unknown-study",
        lambda w: [*_empty_database(w), "stats", "plan", "--metric", "rate", "--pilot", "nosuch"],
        ("no study named 'nosuch'",),
    ),
    Case("stats-plan-kind", lambda w: ["stats", "plan", "--metric", "nosuch"], ("nosuch",)),
]


def _empty_database(work: Path) -> list[str]:
    """Create the case's database (an empty, migrated one beside ``work``): a missing file is its own
    refusal (exit 1, tests/bad_inputs/test_review_bad_inputs.py), here the study is what is unknown."""
    from review_app.db.engine import make_engine
    from review_app.db.migrate import upgrade

    engine = make_engine(f"sqlite:///{work.parent / 'medrev.db'}")
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return []


CASES = [*MMB_FILES, *ARGUMENTS, *RUN_DIRS, *HEALTHCONTRADICT, *TROJAN, *GENERATE, *STATS]


def test_the_corpus_is_large_and_names_are_unique():
    assert len(CASES) + len(MACHINE_FAULTS) >= 110
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    for module in case.needs:
        pytest.importorskip(module, reason=f"{case.name} needs {module} (an optional extra) to reach the input")
    check(case, tmp_path)


MACHINE_FAULTS: list[Case] = [
    Case(
        "machine-stats-plan-database-is-a-folder",
        lambda w: [
            "--database-url",
            f"sqlite:///{folder(w / 'db')}",
            "stats",
            "plan",
            "--metric",
            "rate",
            "--pilot",
            "p",
        ],
        ("db", "is a folder, not a database file"),
        code=MACHINE,
    ),
    # /sys refuses a new folder to everyone (root included): the machine, not the input, is at fault
    Case(
        "machine-out-not-creatable",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])), out="/sys/medrev-run"),
        ("/sys/medrev-run", "cannot create"),
        code=MACHINE,
    ),
    Case(
        "machine-report-out-not-creatable",
        lambda w: ["bench", "report", str(old_run(w)), "--out", "/sys/medrev-report"],
        ("/sys/medrev-report",),
        code=MACHINE,
    ),
]


@pytest.mark.parametrize("case", MACHINE_FAULTS, ids=[case.name for case in MACHINE_FAULTS])
def test_machine_faults_are_one_sentence_and_exit_1(case: Case, tmp_path: Path) -> None:
    outcome = check(case, tmp_path)
    assert len([line for line in outcome.stderr.splitlines() if line.strip()]) == 1, outcome.stderr
