"""Bad database URLs, and a database that cannot be written: one sentence, exit 1, nothing written.

Database-URL cases need no server of their own: they run once (not on each backend). The corpus of the
``review`` commands as a whole is checked here too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from review_app.db.connect import dispose_engines
from tests.bad_inputs.corpus import MACHINE, Case, check, parametrize, write
from tests.bad_inputs.review_support import FRESH, jsonl, seed, table_counts
from tests.bad_inputs.test_review_commands import COMMAND_CASES
from tests.bad_inputs.test_review_import_files import FILE_CASES
from tests.bad_inputs.test_review_import_runs import RUN_CASES


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


@parametrize(URL_CASES)
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
    assert len(FILE_CASES) + len(RUN_CASES) + len(COMMAND_CASES) + len(URL_CASES) + 1 >= 50
