"""Bad input to ``bench run healthcontradict``: its instances, queries, documents and pairs, and its arguments.

Each case asserts (``corpus.check``) a clean refusal naming the file and line, with the case folder
unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.bench_support import DEAD, HC_ROW, fifo, folder, jsonl, jsonl_encoding_cases
from tests.bad_inputs.corpus import Case, check, parametrize, write

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


@parametrize(HEALTHCONTRADICT)
def test_refused_cleanly(case: Case, tmp_path: Path) -> None:
    check(case, tmp_path)
