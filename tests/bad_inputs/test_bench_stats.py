"""Bad input to the ``stats`` commands: rating and outcome tables, their columns and options, and the pilot.

Each case asserts (``corpus.check``) a clean refusal naming the file and line, with the case folder
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.bench_support import fifo, folder
from tests.bad_inputs.corpus import Case, check, parametrize, write

AGREE_HEADER = "unit,rater,score\n"
AGREE_COLUMNS = ("--score", "score", "--unit", "unit", "--rater", "rater")


def agreement(content: bytes | str, *extra: str, name: str = "r.csv") -> Callable[[Path], list[str]]:
    return lambda w: [
        "stats",
        "agreement",
        "--input",
        write(w / name, content),
        *AGREE_COLUMNS,
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
    refusal (exit 1, tests/bad_inputs/test_review_database_urls.py), here the study is what is unknown."""
    from review_app.db.engine import make_engine
    from review_app.db.migrate import upgrade

    engine = make_engine(f"sqlite:///{work.parent / 'medrev.db'}")
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return []


@parametrize(STATS)
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
