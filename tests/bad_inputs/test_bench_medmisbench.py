"""Bad input to ``bench run medmisbench``: its data files in every source format, and its arguments.

Each case asserts (``corpus.check``): the exit code (2 bad input, 1 a fault of the machine), no traceback,
the message names the file and line (where there is one), and the case folder is unchanged: a refused
command writes nothing and leaves no directory behind. The data files: JSONL, JSON, CSV and Parquet, the
byte-level faults, rows the released format or medrev's strict reading refuses, and one cell check shared
by every reader of the released format; the arguments are checked before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.bench_support import (
    DEAD,
    ROW,
    ROW2,
    csv_bytes,
    fifo,
    folder,
    jsonl,
    jsonl_encoding_cases,
    mmb,
    parquet,
)
from tests.bad_inputs.corpus import Case, check, parametrize, write


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
# (authors) protocol as under strict, and by ``review import`` (tests/bad_inputs/test_review_import_files.py).
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



@parametrize([*MMB_FILES, *ARGUMENTS])
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
