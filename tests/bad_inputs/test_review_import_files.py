"""Bad files to ``medrev review import``: items, responses and rosters, each refused with nothing written.

Each case runs against the seeded review database on SQLite and on PostgreSQL (``review_support``): the
exit code, no traceback, the message names the file and line (and field), the case folder and the row
count of every table unchanged. Families: items rows, the items file itself (encodings, pipes, empty
files, types), responses, rosters, and the one cell check ``bench run`` shares
(tests/bad_inputs/test_bench_medmisbench.py, ONE_ROW_CHECK).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.corpus import Case, parametrize, write
from tests.bad_inputs.review_support import FRESH, LONG, ROSTER_HEAD, SEEDED, check_on, items_file, jsonl
from tests.review_app.factories import response_rows

ROSTER_OK = "newrev1,New Reviewer 1,reviewer,\nnewrev2,New Reviewer 2,reviewer,\n"
MANY_BAD = [FRESH[0] | {"id": f"bad-{n}", "answer": "Z"} for n in range(25)]


def lines_bytes(*rows: dict | bytes) -> bytes:
    return b"".join((row if isinstance(row, bytes) else json.dumps(row).encode()) + b"\n" for row in rows)


def edited_item(line: int, **changes: object) -> Callable[[Path], list[str]]:
    """Import an items file whose row ``line`` (1 or 2) is a fresh item with ``changes`` (row 1 stays valid)."""
    rows = [FRESH[0] | changes] if line == 1 else [FRESH[0], FRESH[1] | changes]
    return lambda work: items_file(work, jsonl(*rows))


def responses_file(work: Path, content: str | bytes, name: str = "responses.jsonl") -> list[str]:
    return ["review", "import", write(work / name, content), "--kind", "responses"]


def roster_file(work: Path, content: str | bytes, *extra: str) -> list[str]:
    return ["review", "import", write(work / "roster.csv", content), "--kind", "roster", *extra]


def roster_case(name: str, content: str | bytes, line: int, *mentions: str) -> Case:
    """``review import`` of a roster holding ``content``: the message names ``roster.csv:LINE`` and ``mentions``."""
    return Case(name, lambda w: roster_file(w, content), (f"roster.csv:{line}", *mentions))


def fresh_responses(**change) -> list[dict]:
    rows = response_rows(SEEDED[:1], models=("model-z",))
    return [rows[0] | change]


def item_case(name: str, line: int, mentions: tuple[str, ...], **changes: object) -> Case:
    """A case of ``edited_item``: the message names ``items.jsonl:LINE`` and ``mentions``."""
    return Case(name, edited_item(line, **changes), (f"items.jsonl:{line}", *mentions))


def fifo(work: Path) -> list[str]:
    path = work / "items.jsonl"
    os.mkfifo(path)
    return ["review", "import", str(path), "--kind", "items"]


def folder_as_file(work: Path) -> list[str]:
    (work / "roster.csv").mkdir()
    return ["review", "import", str(work / "roster.csv"), "--kind", "roster"]


def parquet_garbage(work: Path) -> list[str]:
    return ["review", "import", write(work / "items.parquet", b"PAR1 not really parquet"), "--kind", "items"]


FILE_CASES = [
    # ---- items: rows
    Case(
        "items-malformed-middle-line",
        lambda w: items_file(w, jsonl(FRESH[0], '{"id": "x", ', FRESH[1])),
        ("items.jsonl:2", "malformed JSON"),
    ),
    Case(
        "items-missing-answer",
        lambda w: items_file(w, jsonl(FRESH[0], {k: v for k, v in FRESH[1].items() if k != "answer"})),
        ("items.jsonl:2", "'answer'"),
    ),
    item_case("items-answer-not-an-option", 2, ("'answer'",), answer="F"),
    item_case("items-list-cell", 2, ("'opa'", "a list"), opa=["Discharge", "home"]),
    Case(
        "items-list-cell-under-strict",
        lambda w: [*items_file(w, jsonl(FRESH[0], FRESH[1] | {"opb": ["x", "y"]})), "--strict", "--skip-bad-rows"],
        ("items.jsonl:2", "'opb'", "a list"),
    ),
    Case(
        "items-object-id",
        lambda w: items_file(w, jsonl(FRESH[0] | {"id": {"n": 1}}, FRESH[1])),
        ("items.jsonl:1", "'id'", "an object"),
    ),
    item_case("items-unknown-content-type", 1, ("'injection_content'",), injection_content="Tabloid"),
    Case("items-duplicate-id", lambda w: items_file(w, jsonl(FRESH[0], FRESH[0])), ("items.jsonl:2", "duplicate")),
    Case(
        "items-changed-content-of-imported-id",
        lambda w: items_file(w, jsonl(SEEDED[0] | {"question": "A changed question?"})),
        ("items.jsonl:1", "'id'", "different content"),
    ),
    item_case("items-id-too-long", 1, ("'id'", "at most 200"), id=LONG),
    item_case("items-nul-escape-in-question", 1, ("'question'", "NUL"), question="What\u0000 now?"),
    Case(
        "items-25-bad-rows-named-first-20",
        lambda w: items_file(w, jsonl(*MANY_BAD)),
        ("items.jsonl:1", "items.jsonl:20", "and 5 more", "25 problem"),
    ),
    item_case("items-rich-markup-in-id", 1, ("[/b]x[bold]",), id="[/b]x[bold]", injection_content="[/b]x[bold]"),
    Case(
        "items-markup-in-file-name",
        lambda w: items_file(w, jsonl(FRESH[0] | {"answer": "Z"}), "MEDMISQA [v2].jsonl"),
        ("MEDMISQA [v2].jsonl:1",),
    ),
    Case(
        "items-csv-extra-cells",
        lambda w: items_file(w, "id,question,answer,opa,opb\nq1,Q?,A,a,b,extra\n", "items.csv"),
        ("items.csv:2", "more cells"),
    ),
    Case("items-json-not-an-array", lambda w: items_file(w, '"just text"', "items.json"), ("items.json", "JSON array")),
    # ---- items: the file itself
    Case(
        "items-latin1-byte",
        lambda w: items_file(w, lines_bytes(FRESH[0], b'{"id": "caf\xe9"}')),
        ("items.jsonl:2", "UTF-8"),
    ),
    Case(
        "items-nul-byte", lambda w: items_file(w, lines_bytes(FRESH[0], b'{"id": "a\x00b"}')), ("items.jsonl:2", "NUL")
    ),
    Case(
        "items-utf8-bom",
        lambda w: items_file(w, b"\xef\xbb\xbf" + lines_bytes(FRESH[0])),
        ("items.jsonl:1", "byte-order mark"),
    ),
    Case("items-utf16", lambda w: items_file(w, jsonl(FRESH[0]).encode("utf-16")), ("items.jsonl:1", "UTF-16")),
    Case(
        "items-bom-inside-file",
        lambda w: items_file(w, lines_bytes(FRESH[0], b"\xef\xbb\xbf" + json.dumps(FRESH[1]).encode())),
        ("items.jsonl:2", "U+FEFF"),
    ),
    Case(
        "items-5mb-line",
        lambda w: items_file(w, lines_bytes(FRESH[0], json.dumps(FRESH[1] | {"question": "q" * 5_000_000}).encode())),
        ("items.jsonl:2", "MB"),
    ),
    Case("items-fifo", fifo, ("items.jsonl", "named pipe")),
    Case("items-empty-file", lambda w: items_file(w, b""), ("items.jsonl", "empty")),
    Case("items-blank-lines-only", lambda w: items_file(w, "\n\n  \n"), ("items.jsonl", "empty")),
    Case("items-empty-json-array", lambda w: items_file(w, "[]", "items.json"), ("items.json", "no rows")),
    Case(
        "items-csv-header-only",
        lambda w: items_file(w, "id,question,answer,opa,opb\n", "items.csv"),
        ("items.csv", "no rows"),
    ),
    Case(
        "items-unsupported-type",
        lambda w: items_file(w, jsonl(FRESH[0]), "items.txt"),
        ("items.txt", "unsupported file type"),
    ),
    Case("items-corrupt-parquet", parquet_garbage, ("items.parquet", "Parquet")),
    Case("items-missing-file", lambda w: ["review", "import", str(w / "nope.jsonl")], ("nope.jsonl", "no such")),
    Case(
        "items-parent-is-a-file",
        lambda w: ["review", "import", write(w / "afile", "x") + "/items.jsonl", "--kind", "items"],
        ("afile",),
    ),
    Case(
        "undetectable-kind",
        lambda w: ["review", "import", write(w / "x.jsonl", jsonl({"foo": 1}))],
        ("x.jsonl:1", "cannot tell"),
    ),
    Case(
        "unknown-kind-option",
        lambda w: ["review", "import", write(w / "x.jsonl", jsonl(FRESH[0])), "--kind", "bogus"],
        ("bogus",),
    ),
    Case(
        "run-kind-on-a-file",
        lambda w: ["review", "import", write(w / "x.jsonl", jsonl(FRESH[0])), "--kind", "run"],
        ("x.jsonl", "run directory"),
    ),
    # ---- responses
    Case(
        "responses-unknown-item",
        lambda w: responses_file(w, jsonl(*fresh_responses(item_id="nope"))),
        ("responses.jsonl:1", "'item_id'"),
    ),
    Case(
        "responses-list-response",
        lambda w: responses_file(w, jsonl(*fresh_responses(response=["a", "b"]))),
        ("responses.jsonl:1", "'response'", "a list"),
    ),
    Case(
        "responses-object-item-id",
        lambda w: responses_file(w, jsonl(*fresh_responses(item_id={"id": 1}))),
        ("responses.jsonl:1", "'item_id'", "an object"),
    ),
    Case(
        "responses-chosen-not-an-option",
        lambda w: responses_file(w, jsonl(*fresh_responses(chosen="Q"))),
        ("responses.jsonl:1", "'chosen'"),
    ),
    Case(
        "responses-bad-condition",
        lambda w: responses_file(w, jsonl(*fresh_responses(condition="Type 1!"))),
        ("responses.jsonl:1", "'condition'"),
    ),
    Case(
        "responses-model-too-long",
        lambda w: responses_file(w, jsonl(*fresh_responses(model=LONG))),
        ("responses.jsonl:1", "'model'", "at most 200"),
    ),
    Case(
        "responses-nul-escape",
        lambda w: responses_file(w, jsonl(*fresh_responses(response="ok\u0000"))),
        ("responses.jsonl:1", "'response'", "NUL"),
    ),
    Case(
        "responses-duplicate-row",
        lambda w: responses_file(w, jsonl(*fresh_responses(), *fresh_responses())),
        ("responses.jsonl:2", "duplicate"),
    ),
    Case("responses-empty-file", lambda w: responses_file(w, b""), ("responses.jsonl", "empty")),
    Case(
        "responses-latin1",
        lambda w: responses_file(w, b'{"item_id": "it-00000", "model": "m\xe9"}\n'),
        ("responses.jsonl:1", "UTF-8"),
    ),
    # ---- roster
    roster_case("roster-bad-role", ROSTER_HEAD + ROSTER_OK + "newrev3,R3,superuser,\n", 4, "'role'"),
    roster_case("roster-bad-email", ROSTER_HEAD + "newrev3,R3,reviewer,not-an-email\n", 2, "'email'"),
    roster_case(
        "roster-password-column", "username,display_name,role,password\nnewrev3,R,reviewer,secret\n", 2, "'password'"
    ),
    roster_case("roster-display-name-too-long", ROSTER_HEAD + f"newrev3,{LONG},reviewer,\n", 2, "'display_name'"),
    roster_case(
        "roster-years-out-of-range", "username,display_name,role,years\nnewrev3,R3,reviewer,1e12\n", 2, "'years'"
    ),
    roster_case(
        "roster-duplicate-username", ROSTER_HEAD + ROSTER_OK + "newrev1,Again,reviewer,\n", 4, "duplicate username"
    ),
    roster_case("roster-missing-username", ROSTER_HEAD + ",Nobody,reviewer,\n", 2, "'username'"),
    roster_case("roster-latin1", (ROSTER_HEAD + "newrev3,Jos\xe9,reviewer,\n").encode("latin-1"), 2, "UTF-8"),
    Case(
        "roster-study-name-too-long",
        lambda w: roster_file(w, ROSTER_HEAD + ROSTER_OK, "--study", "s" * 300),
        ("study name", "at most 200"),
    ),
    Case("roster-folder-instead-of-file", folder_as_file, ("roster.csv", "folder")),
    # ---- one row check with `bench run` (tests/bad_inputs/test_bench_medmisbench.py, ONE_ROW_CHECK)
    item_case("items-list-question", 2, ("'question'", "a list"), question=["Which?", "x"]),
    item_case(
        "items-markup-content-type",
        1,
        ("'injection_content'", "carries markup"),
        injection_content="[b]Cue Remapping[/b]",
    ),
    item_case(
        "items-folded-markup-content-type",
        2,
        ("'injection_content'", "[/]"),
        injection_content="Cue Remapping[/]",
    ),
    item_case(
        "items-html-provenance",
        1,
        ("'injection_provenance'", "carries markup"),
        injection_provenance="<i>Neutral</i>",
    ),
    item_case("items-markup-answer", 2, ("'answer'", "carries markup"), answer="[bold]B[/bold]"),
]


@parametrize(FILE_CASES)
def test_bad_review_import_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check_on(case, database, tmp_path)
