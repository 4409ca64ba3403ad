"""Bad input to ``bench run trojan`` and ``bench ingest trojan``: records, fallback tables, dates, judge.

The records file (JSON) and the retraction-watch fallback tables (CSV, JSON Lines), the dates they carry or
``--retrieved-at`` gives, and the judge's arguments. Each case asserts (``corpus.check``) a clean refusal
naming the file and line, with the case folder unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.bench_support import TJ_ROW, TROJAN_RUN, fifo, folder, jsonl
from tests.bad_inputs.corpus import Case, check, parametrize, write


def tj(content: Callable[[Path], str], *extra: str) -> Callable[[Path], list[str]]:
    return lambda w: [*TROJAN_RUN, "--data", content(w), "--out", str(w / "run"), *extra]


def one_record(w: Path) -> str:
    """A records file of one valid record: what a case about an argument reads."""
    return write(w / "t.json", json.dumps([TJ_ROW]))


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
    Case("tj-expect-count", tj(one_record, "--expect-count", "2"), ("t.json", "expected 2")),
    Case("tj-judge-provider", tj(one_record, "--judge-provider", "acme"), ("--provider", "acme")),
    Case("tj-judge-base-url", tj(one_record, "--judge-base-url", "judge"), ("--base-url", "judge")),
    Case("tj-judge-temperature", tj(one_record, "--judge-temperature", "-2"), ("--judge-temperature",)),
    Case("tj-max-tokens", tj(one_record, "--max-tokens", "-5"), ("--max-tokens",)),
    Case("ingest-latin1", ingest(lambda w: write(w / "t.json", b'[\n{"id": "t\xe9"}\n]')), ("t.json:2", "UTF-8")),
    Case(
        "ingest-missing-field",
        ingest(lambda w: write(w / "t.json", json.dumps([{**TJ_ROW, "note": None}]))),
        ("t.json", "note"),
    ),
    Case(
        "ingest-default-isimpact",
        ingest(one_record, "--fallback", "rw", "--default-isimpact", "perhaps"),
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
        ingest(one_record, "--retrieved-at", "last tuesday"),
        ("--retrieved-at", "ISO 8601", "'last tuesday'"),
    ),
    Case(
        "ingest-retrieved-at-impossible-day",
        ingest(one_record, "--retrieved-at", "2026-02-30"),
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
    Case("tj-retrieved-at-words", tj(one_record, "--retrieved-at", "yesterday"), ("--retrieved-at", "'yesterday'")),
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


@parametrize(TROJAN)
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
