"""Bad arguments to the other ``medrev review`` commands, on a database holding study S1.

``pool``, ``assign``, ``reassign``, ``enrol``, ``status``, ``study``, ``user``, ``export`` and ``import``'s
own options: each case runs against the seeded review database on SQLite and on PostgreSQL
(``review_support``) and is refused naming the argument, with the case folder and every table's row
count unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.bad_inputs.corpus import Case, parametrize, write
from tests.bad_inputs.review_support import FRESH, LONG, check_on, items_file, jsonl


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


@parametrize(COMMAND_CASES)
def test_bad_review_command_is_refused_and_changes_nothing(case: Case, database: str, tmp_path: Path) -> None:
    check_on(case, database, tmp_path)
