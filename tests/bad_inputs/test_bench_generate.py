"""Bad input to ``bench generate``: a source file in every source format it reads, and its arguments.

Each case asserts (``corpus.check``) a clean refusal naming the file and line, with the case folder
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.bench_support import DEAD, ROW, csv_bytes, fifo, jsonl, old_run
from tests.bad_inputs.corpus import Case, check, parametrize, write

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


@parametrize(GENERATE)
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
