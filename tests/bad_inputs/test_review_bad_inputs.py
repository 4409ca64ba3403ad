"""Bad input to ``medrev review ...`` and bad database URLs: every case refused cleanly, nothing written.

Each import case runs against a review database that already holds a study's data (items, responses,
a roster), on SQLite and on PostgreSQL, and asserts through ``tests.bad_inputs.corpus.check``: the exit
code (2 for bad input, 1 for a database that cannot be used), no traceback, the message names the file
and line (and field) where there is one, the case folder unchanged, and the row count of every table
of the database unchanged. Database-URL cases need no server of their own: they run once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlmodel import SQLModel

from review_app.db.connect import dispose_engines
from review_app.db.engine import make_engine, read_session
from review_app.db.migrate import upgrade
from review_app.services import importing, studies
from review_app.services.actors import SYSTEM
from tests.bad_inputs.corpus import MACHINE, Case, check, write
from tests.postgres_admin import migrated_template, pg_url, scratch_database
from tests.review_app.factories import item_rows, response_rows

ROOT = Path(__file__).resolve().parents[2]
OLD_RUN = ROOT / "tests" / "data" / "medmisbench_old_run"
JUDGE_RUN = ROOT / "review_app" / "demo_data" / "trojan"
SEEDED = item_rows(3)  # in the database before every case
FRESH = item_rows(3, start=100)  # new items for the files under test
ROSTER_HEAD = "username,display_name,role,email\n"
ROSTER_OK = "newrev1,New Reviewer 1,reviewer,\nnewrev2,New Reviewer 2,reviewer,\n"


# ---------------------------------------------------------------- file builders


def jsonl(*rows: dict | str) -> str:
    """JSON Lines text; a str row is written as it is (a damaged line)."""
    return "".join((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n" for row in rows)


def lines_bytes(*rows: dict | bytes) -> bytes:
    return b"".join((row if isinstance(row, bytes) else json.dumps(row).encode()) + b"\n" for row in rows)


def items_file(work: Path, content: str | bytes, name: str = "items.jsonl") -> list[str]:
    return ["review", "import", write(work / name, content), "--kind", "items"]


def edited_item(line: int, **changes: object) -> Callable[[Path], list[str]]:
    """Import an items file whose row ``line`` (1 or 2) is a fresh item with ``changes`` (row 1 stays valid)."""
    rows = [FRESH[0] | changes] if line == 1 else [FRESH[0], FRESH[1] | changes]
    return lambda work: items_file(work, jsonl(*rows))


def responses_file(work: Path, content: str | bytes, name: str = "responses.jsonl") -> list[str]:
    return ["review", "import", write(work / name, content), "--kind", "responses"]


def roster_file(work: Path, content: str | bytes, *extra: str) -> list[str]:
    return ["review", "import", write(work / "roster.csv", content), "--kind", "roster", *extra]


def fresh_responses(**change) -> list[dict]:
    rows = response_rows(SEEDED[:1], models=("model-z",))
    return [rows[0] | change]


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


def fifo(work: Path) -> list[str]:
    path = work / "items.jsonl"
    os.mkfifo(path)
    return ["review", "import", str(path), "--kind", "items"]


def folder_as_file(work: Path) -> list[str]:
    (work / "roster.csv").mkdir()
    return ["review", "import", str(work / "roster.csv"), "--kind", "roster"]


def parquet_garbage(work: Path) -> list[str]:
    return ["review", "import", write(work / "items.parquet", b"PAR1 not really parquet"), "--kind", "items"]


LONG = "x" * 300
MANY_BAD = [FRESH[0] | {"id": f"bad-{n}", "answer": "Z"} for n in range(25)]

IMPORT_CASES = [
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
    Case(
        "items-answer-not-an-option",
        edited_item(2, answer="F"),
        ("items.jsonl:2", "'answer'"),
    ),
    Case(
        "items-list-cell",
        edited_item(2, opa=["Discharge", "home"]),
        ("items.jsonl:2", "'opa'", "a list"),
    ),
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
    Case(
        "items-unknown-content-type",
        edited_item(1, injection_content="Tabloid"),
        ("items.jsonl:1", "'injection_content'"),
    ),
    Case("items-duplicate-id", lambda w: items_file(w, jsonl(FRESH[0], FRESH[0])), ("items.jsonl:2", "duplicate")),
    Case(
        "items-changed-content-of-imported-id",
        lambda w: items_file(w, jsonl(SEEDED[0] | {"question": "A changed question?"})),
        ("items.jsonl:1", "'id'", "different content"),
    ),
    Case(
        "items-id-too-long",
        edited_item(1, id=LONG),
        ("items.jsonl:1", "'id'", "at most 200"),
    ),
    Case(
        "items-nul-escape-in-question",
        edited_item(1, question="What\u0000 now?"),
        ("items.jsonl:1", "'question'", "NUL"),
    ),
    Case(
        "items-25-bad-rows-named-first-20",
        lambda w: items_file(w, jsonl(*MANY_BAD)),
        ("items.jsonl:1", "items.jsonl:20", "and 5 more", "25 problem"),
    ),
    Case(
        "items-rich-markup-in-id",
        edited_item(1, id="[/b]x[bold]", injection_content="[/b]x[bold]"),
        ("items.jsonl:1", "[/b]x[bold]"),
    ),
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
    Case(
        "roster-bad-role",
        lambda w: roster_file(w, ROSTER_HEAD + ROSTER_OK + "newrev3,R3,superuser,\n"),
        ("roster.csv:4", "'role'"),
    ),
    Case(
        "roster-bad-email",
        lambda w: roster_file(w, ROSTER_HEAD + "newrev3,R3,reviewer,not-an-email\n"),
        ("roster.csv:2", "'email'"),
    ),
    Case(
        "roster-password-column",
        lambda w: roster_file(w, "username,display_name,role,password\nnewrev3,R,reviewer,secret\n"),
        ("roster.csv:2", "'password'"),
    ),
    Case(
        "roster-display-name-too-long",
        lambda w: roster_file(w, ROSTER_HEAD + f"newrev3,{LONG},reviewer,\n"),
        ("roster.csv:2", "'display_name'"),
    ),
    Case(
        "roster-years-out-of-range",
        lambda w: roster_file(w, "username,display_name,role,years\nnewrev3,R3,reviewer,1e12\n"),
        ("roster.csv:2", "'years'"),
    ),
    Case(
        "roster-duplicate-username",
        lambda w: roster_file(w, ROSTER_HEAD + ROSTER_OK + "newrev1,Again,reviewer,\n"),
        ("roster.csv:4", "duplicate username"),
    ),
    Case(
        "roster-missing-username",
        lambda w: roster_file(w, ROSTER_HEAD + ",Nobody,reviewer,\n"),
        ("roster.csv:2", "'username'"),
    ),
    Case(
        "roster-latin1",
        lambda w: roster_file(w, (ROSTER_HEAD + "newrev3,Jos\xe9,reviewer,\n").encode("latin-1")),
        ("roster.csv:2", "UTF-8"),
    ),
    Case(
        "roster-study-name-too-long",
        lambda w: roster_file(w, ROSTER_HEAD + ROSTER_OK, "--study", "s" * 300),
        ("study name", "at most 200"),
    ),
    Case("roster-folder-instead-of-file", folder_as_file, ("roster.csv", "folder")),
    # ---- bench run directories
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
    # ---- one row check with `bench run` (tests/bad_inputs/test_bench_bad_inputs.py, ONE_ROW_CHECK)
    Case(
        "items-list-question",
        edited_item(2, question=["Which?", "x"]),
        ("items.jsonl:2", "'question'", "a list"),
    ),
    Case(
        "items-markup-content-type",
        edited_item(1, injection_content="[b]Cue Remapping[/b]"),
        ("items.jsonl:1", "'injection_content'", "carries markup"),
    ),
    Case(
        "items-folded-markup-content-type",
        edited_item(2, injection_content="Cue Remapping[/]"),
        ("items.jsonl:2", "'injection_content'", "[/]"),
    ),
    Case(
        "items-html-provenance",
        edited_item(1, injection_provenance="<i>Neutral</i>"),
        ("items.jsonl:1", "'injection_provenance'", "carries markup"),
    ),
    Case(
        "items-markup-answer",
        edited_item(2, answer="[bold]B[/bold]"),
        ("items.jsonl:2", "'answer'", "carries markup"),
    ),
]


def review(*args: str) -> Callable[[Path], list[str]]:
    return lambda _work: ["review", *args]


COMMAND_CASES = [  # the other review commands: bad arguments, on a database holding study S1
    Case(
        "pool-quota-not-a-number",
        review("pool", "--study", "S1", "--size", "3", "--quota", "subset=MEDMISQA:x"),
        ("'x' is not a number",),
    ),
    Case("pool-negative-size", review("pool", "--study", "S1", "--size", "-3"), ("at least 1",)),
    Case("pool-unknown-study", review("pool", "--study", "nope", "--size", "3"), ("no study named 'nope'",)),
    Case("assign-dual-share-over-1", review("assign", "--study", "S1", "--dual-share", "2"), ("--dual-share",)),
    Case("assign-no-raters", review("assign", "--study", "S1", "--raters", "0"), ("--raters",)),
    Case("reassign-unknown-user", review("reassign", "--study", "S1", "--from", "ghost"), ("ghost",)),
    Case("enrol-unknown-user", review("enrol", "--study", "S1", "ghost"), ("ghost",)),
    Case("status-unknown-study", review("status", "--study", "nope"), ("nope",)),
    Case("as-unknown-user", review("--as", "ghost", "status"), ("ghost",)),
    Case("study-name-too-long", review("study", "create", LONG), ("study name", "at most 200")),
    Case("study-unknown-rubric", review("study", "create", "S2", "--rubrics", "Z"), ("unknown rubric 'Z'",)),
    Case("study-already-exists", review("study", "create", "S1"), ("already exists",)),
    Case("user-add-bad-username", review("user", "add", "Bad!Name", "--no-password"), ("username",)),
    Case("user-add-bad-email", review("user", "add", "okname", "--email", "nope", "--no-password"), ("email",)),
    Case(
        "user-add-negative-years",
        review("user", "add", "okname", "--years", "-5", "--no-password"),
        ("years_experience",),
    ),
    Case(
        "user-add-bad-language",
        review("user", "add", "okname", "--languages", "xx_bad", "--no-password"),
        ("languages",),
    ),
    Case("user-add-unknown-role", review("user", "add", "okname", "--role", "king", "--no-password"), ("role",)),
    Case("user-add-existing", review("user", "add", "oldrev1", "--no-password"), ("oldrev1",)),
    Case("user-role-unknown-user", review("user", "role", "ghost", "--role", "lead"), ("ghost",)),
    Case("user-short-password", review("user", "add", "okname", "--password-stdin"), ("at least",), stdin="short\n"),
    Case(
        "export-out-is-a-file",
        lambda w: ["review", "export", "--study", "S1", "--out", write(w / "afile", "x")],
        ("afile",),
    ),
    Case(
        "export-unknown-format",
        lambda w: ["review", "export", "--study", "S1", "--out", str(w / "out"), "--format", "bogus"],
        ("bogus",),
    ),
    Case(
        "import-with-study-name-too-long",
        lambda w: [*items_file(w, jsonl(*FRESH)), "--study", LONG],
        ("study name", "at most 200"),
    ),
]


# ---------------------------------------------------------------- databases


def table_counts(url: str) -> dict[str, int]:
    """Rows in every table of the database (the "database unchanged" check)."""
    engine = make_engine(url)
    try:
        with read_session(engine) as session:
            return {
                name: session.execute(select(func.count()).select_from(table)).scalar_one()
                for name, table in sorted(SQLModel.metadata.tables.items())
            }
    finally:
        engine.dispose()


def seed(url: str, folder: Path) -> None:
    """A database holding a study's data already: items, responses and a roster."""
    engine = make_engine(url)
    try:
        upgrade(engine)
        folder.mkdir(parents=True, exist_ok=True)
        items = folder / "seed_items.jsonl"
        items.write_text(jsonl(*SEEDED), encoding="utf-8")
        importing.import_items(engine, items, actor=SYSTEM)
        responses = folder / "seed_responses.jsonl"
        responses.write_text(jsonl(*response_rows(SEEDED)), encoding="utf-8")
        importing.import_responses(engine, responses, actor=SYSTEM)
        roster = folder / "seed_roster.csv"
        roster.write_text(ROSTER_HEAD + "oldrev1,Old Reviewer,reviewer,\n", encoding="utf-8")
        importing.import_roster(engine, roster, actor=SYSTEM)
        studies.create_study(engine, "S1", actor=SYSTEM)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def pg_template() -> Iterator[str]:
    with migrated_template("medrev_badtpl") as name:
        yield name


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request, tmp_path) -> Iterator[str]:
    """The URL of a seeded review database on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'review.db'}"
        seed(url, tmp_path / "seed")
        yield url
        dispose_engines()
        return
    with scratch_database("medrev_bad", template=request.getfixturevalue("pg_template")) as name:
        url = pg_url(name)
        try:
            seed(url, tmp_path / "seed")
            yield url
        finally:
            dispose_engines()


def _on(case: Case, url: str) -> Case:
    counts: Callable[[Path], dict[str, int]] = lambda _work: table_counts(url)  # noqa: E731
    return dataclasses.replace(case, env={"MEDREV_DATABASE_URL": url, **case.env}, state=counts)


@pytest.mark.parametrize("case", IMPORT_CASES, ids=[c.name for c in IMPORT_CASES])
def test_bad_review_import_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check(_on(case, database), tmp_path)


@pytest.mark.parametrize("case", COMMAND_CASES, ids=[c.name for c in COMMAND_CASES])
def test_bad_review_command_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check(_on(case, database), tmp_path)


# ---------------------------------------------------------------- database URLs


def _url_case(
    name: str, url: Callable[[Path], str], mentions: tuple[str, ...], argv: tuple[str, ...] = ("review", "status")
) -> Case:
    def make(work: Path) -> list[str]:
        return ["--database-url", url(work), *argv]

    return Case(name, make, mentions, code=MACHINE)


def _not_a_database(work: Path) -> str:
    return "sqlite:///" + write(work / "notes.db", "these are my notes, not a database\n" * 20)


def _folder(work: Path) -> str:
    (work / "data.db").mkdir()
    return f"sqlite:///{work / 'data.db'}"


def _parent_is_file(work: Path) -> str:
    return f"sqlite:///{write(work / 'afile', 'x')}/medrev.db"


def _immutable_new_file(work: Path) -> str:
    return f"sqlite:///file:{work / 'none.db'}?immutable=1&uri=true"


def _import_args(work: Path) -> tuple[str, ...]:
    return ("review", "import", write(work / "items.jsonl", jsonl(*FRESH)), "--kind", "items")


URL_CASES = [
    _url_case("url-garbage", lambda w: "garbage://???", ("MEDREV_DATABASE_URL",)),
    _url_case("url-not-a-url", lambda w: "not a url at all", ("not a url at all",)),
    _url_case("url-unsupported-database", lambda w: "mysql://someone@localhost/db", ("mysql",)),
    _url_case("url-postgres-without-driver", lambda w: "postgresql://root@127.0.0.1/test", ("psycopg",)),
    _url_case(
        "url-connection-refused", lambda w: "postgresql+psycopg://root@127.0.0.1:1/test", ("127.0.0.1:1", "refused")
    ),
    _url_case(
        "url-unknown-host", lambda w: "postgresql+psycopg://root@no-such-host.invalid/test", ("no-such-host.invalid",)
    ),
    _url_case(
        "url-unknown-postgres-database",
        lambda w: "postgresql+psycopg://postgres@127.0.0.1/nosuchdb_medrev",
        ("nosuchdb_medrev", "does not exist"),
    ),
    _url_case("url-not-a-sqlite-file", _not_a_database, ("notes.db", "not a SQLite database")),
    _url_case("url-not-a-sqlite-file-study-list", _not_a_database, ("notes.db",), argv=("review", "study", "list")),
    _url_case("url-folder", _folder, ("data.db", "folder")),
    _url_case("url-parent-is-a-file", _parent_is_file, ("afile", "is a file")),
    _url_case("url-missing-folder", lambda w: f"sqlite:///{w / 'no' / 'such' / 'medrev.db'}", ("does not exist",)),
    _url_case("url-in-memory", lambda w: "sqlite://", ("in-memory",)),
    _url_case("url-sqlite-options-ignored", lambda w: f"sqlite:///{w / 'x.db'}?immutable=1", ("uri=true",)),
    _url_case("url-immutable-missing-file", _immutable_new_file, ("none.db",)),
    _url_case("url-mistyped-sqlite-path", lambda w: f"sqlite:///{w / 'typo.db'}", ("There is no database", "typo.db")),
    _url_case(
        "url-mistyped-path-db-current", lambda w: f"sqlite:///{w / 'typo.db'}", ("typo.db",), argv=("db", "current")
    ),
    _url_case(
        "url-mistyped-path-export",
        lambda w: f"sqlite:///{w / 'typo.db'}",
        ("typo.db",),
        argv=("review", "export", "--study", "x"),
    ),
]


@pytest.mark.parametrize("case", URL_CASES, ids=[c.name for c in URL_CASES])
def test_unusable_database_url_is_one_sentence(case: Case, tmp_path: Path) -> None:
    try:
        outcome = check(case, tmp_path)
    finally:
        dispose_engines()
    assert len([line for line in outcome.stderr.splitlines() if line.strip()]) == 1, outcome.stderr


def test_saving_to_an_immutable_database_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    work_db = tmp_path / "frozen.db"
    seed(f"sqlite:///{work_db}", tmp_path / "seed")
    url = f"sqlite:///file:{work_db}?immutable=1&uri=true"
    case = Case(
        "immutable-import",
        lambda w: ["--database-url", url, *_import_args(w)],
        ("read-only",),
        code=MACHINE,
        state=lambda _w: table_counts(f"sqlite:///{work_db}"),
    )
    try:
        check(case, tmp_path)
    finally:
        dispose_engines()


def test_the_corpus_is_large_enough() -> None:
    assert len(IMPORT_CASES) + len(COMMAND_CASES) + len(URL_CASES) + 1 >= 50
