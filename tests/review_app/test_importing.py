"""Imports are transactional and idempotent; bad files are refused whole with file, line and field."""

import json
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from review_app.db.engine import read_session
from review_app.db.models import ImportBatch, Item, ModelResponse, Reviewer
from review_app.services import accounts, assignment, importing, studies
from review_app.services.actors import SYSTEM, Actor
from review_app.services.errors import PermissionDenied
from review_app.services.importing import ImportRefused

from .factories import item_rows, response_rows, write_jsonl


def _counts(engine):
    with read_session(engine) as session:
        return tuple(
            session.exec(select(func.count()).select_from(model)).one()
            for model in (Item, ModelResponse, Reviewer, ImportBatch)
        )


def test_sample_items_import_and_reimport_is_idempotent(engine, sample_dir):
    first = importing.import_items(engine, sample_dir, actor=SYSTEM)
    assert (first.rows, first.new) == (7, 7)
    again = importing.import_items(engine, sample_dir, actor=SYSTEM)
    assert (again.new, again.unchanged) == (0, 7)
    with read_session(engine) as session:
        journey = session.exec(select(Item).where(Item.external_id == "mj-0001")).one()
    assert journey.language == "zh" and journey.gold_label == "2"
    assert [label for label, _ in journey.options] == ["1", "2", "3", "4"]
    assert journey.target_label in {"1", "3", "4"} and journey.injections["2"].startswith("饮酒后")
    assert journey.content_type == "cue_remapping" and journey.provenance == "neutral"


GOOD = item_rows(3)


@pytest.mark.parametrize(
    ("bad", "field", "message"),
    [
        ('{"id": "broken", ', None, "malformed JSON"),
        ({k: v for k, v in GOOD[0].items() if k != "answer"} | {"id": "x"}, "answer", "no gold answer"),
        (GOOD[0] | {"id": "x", "injection_content": "Dose Inflation"}, "injection_content", "unknown content type"),
        (GOOD[0] | {"id": "x", "injection_provenance": "Tabloid"}, "injection_provenance", "unknown provenance"),
        (GOOD[0] | {"id": "x", "answer": "F"}, "answer", "not among the options"),
        (GOOD[0], "id", "duplicate item id"),
        (GOOD[0] | {"id": "x", "question": ["Which?", "x"]}, "question", "expected text, found a list"),
        (GOOD[0] | {"id": "x", "injection_content": "[b]Cue Remapping[/b]"}, "injection_content", "carries markup"),
        (GOOD[0] | {"id": "x", "injection_content": "Cue Remapping[/]"}, "injection_content", "carries markup"),
        (GOOD[0] | {"id": "x", "answer": "[bold]B[/bold]"}, "answer", "carries markup"),
    ],
)
def test_bad_item_file_is_refused_whole(engine, tmp_path, bad, field, message):
    path = write_jsonl(tmp_path / "items.jsonl", [*GOOD, bad])
    before = _counts(engine)
    with pytest.raises(ImportRefused) as caught:
        importing.import_items(engine, path, actor=SYSTEM)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (4, field) and message in issue.message
    assert "items.jsonl:4" in str(caught.value)
    assert _counts(engine) == before


def test_missing_columns_in_csv(engine, tmp_path):
    path = _csv(tmp_path, "id,question\nq1,What?\n", "items.csv")
    with pytest.raises(ImportRefused, match=r"items.csv:2: field 'answer'"):
        importing.import_items(engine, path, actor=SYSTEM)
    assert _counts(engine)[0] == 0


def test_changed_item_with_same_id_is_refused(engine, tmp_path):
    importing.import_items(engine, write_jsonl(tmp_path / "a.jsonl", GOOD), actor=SYSTEM)
    changed = [GOOD[0] | {"question": "A different stem?"}]
    with pytest.raises(ImportRefused, match="different content"):
        importing.import_items(engine, write_jsonl(tmp_path / "b.jsonl", changed), actor=SYSTEM)


def test_responses_import(engine, tmp_path):
    importing.import_items(engine, write_jsonl(tmp_path / "items.jsonl", GOOD), actor=SYSTEM)
    rows = response_rows(GOOD)
    path = write_jsonl(tmp_path / "responses.jsonl", rows)
    summary = importing.import_responses(engine, path, actor=SYSTEM)
    assert (summary.rows, summary.new) == (9, 9)
    assert importing.import_responses(engine, path, actor=SYSTEM).unchanged == 9
    with read_session(engine) as session:
        labels = {(r.model, r.auto_label) for r in session.exec(select(ModelResponse))}
    assert labels == {("model-a", "FAIL"), ("model-b", "SUCCESS"), ("model-c", "SUCCESS")}


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"item_id": "nope"}, "item_id", "no imported item"),
        ({"chosen": "Q"}, "chosen", "not among the item's options"),
        ({"chosen": "A", "result": "SUCCESS"}, "result", "contradicts"),
        ({"result": "MAYBE"}, "result", "FAIL or SUCCESS"),
        ({"condition": "Type 1!"}, "condition", "condition"),
        ({"target": "B"}, "target", "wrong options"),
    ],
)
def test_bad_response_file_is_refused_whole(engine, tmp_path, change, field, message):
    importing.import_items(engine, write_jsonl(tmp_path / "items.jsonl", GOOD), actor=SYSTEM)
    rows = response_rows(GOOD[:1])
    rows[1] = rows[1] | change
    path = write_jsonl(tmp_path / "responses.jsonl", rows)
    with pytest.raises(ImportRefused) as caught:
        importing.import_responses(engine, path, actor=SYSTEM)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (2, field) and message in issue.message
    assert _counts(engine)[1] == 0


ROSTER = (
    "username,display_name,role,profession,country,years,languages\n"
    "rev01,Dr One,reviewer,Emergency physician,Kenya,4,en\n"
    'rev02,Dr Two,reviewer,Internist,China,7,"en;zh"\n'
    "lead01,Lead One,lead,Epidemiologist,UK,12,en\n"
)


def _csv(tmp_path: Path, text: str = ROSTER, name: str = "roster.csv") -> Path:
    """A CSV file (a roster unless named otherwise) holding ``text`` in the test's folder."""
    path = tmp_path / name
    path.write_text(text)
    return path


def test_roster_import_is_idempotent(engine, tmp_path):
    path = _csv(tmp_path)
    assert importing.import_roster(engine, path, actor=SYSTEM).new == 3
    again = importing.import_roster(engine, path, actor=SYSTEM)
    assert (again.new, again.unchanged, again.updated) == (0, 3, 0)
    with read_session(engine) as session:
        two = session.exec(select(Reviewer).where(Reviewer.username == "rev02")).one()
    assert two.languages == "en,zh" and two.years_experience == 7 and two.password_hash is None


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ("rev03,Dr Three,surgeon,x,y,3,en", "role", "unknown role"),
        ("rev01,Dr One again,reviewer,x,y,3,en", "username", "duplicate username"),
        ("rev03,Dr Three,reviewer,x,y,many,en", "years", "whole number"),
        ("rev03,,reviewer,x,y,3,en", "display_name", "missing"),
    ],
)
def test_bad_roster_is_refused_whole(engine, tmp_path, line, field, message):
    path = _csv(tmp_path, ROSTER + line + "\n")
    with pytest.raises(ImportRefused) as caught:
        importing.import_roster(engine, path, actor=SYSTEM)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (5, field) and message in issue.message
    assert _counts(engine)[2] == 0


def test_roster_with_passwords_is_refused(engine, tmp_path):
    path = _csv(tmp_path, "username,display_name,role,password\nrev01,One,reviewer,hunter2\n")
    with pytest.raises(ImportRefused, match="must not carry passwords"):
        importing.import_roster(engine, path, actor=SYSTEM)


def test_detect_kind(tmp_path, sample_dir):
    roster = _csv(tmp_path, ROSTER, "r.csv")
    responses = write_jsonl(tmp_path / "resp.jsonl", response_rows(GOOD[:1]))
    assert importing.detect_kind(roster) == "roster"
    assert importing.detect_kind(responses) == "responses"
    assert importing.detect_kind(sample_dir) == "items"
    assert importing.detect_kind(sample_dir / "MEDMISQA.jsonl") == "items"
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"foo": 1}) + "\n")
    with pytest.raises(ImportRefused, match="cannot tell"):
        importing.detect_kind(odd)


def test_dry_run_validates_and_counts_but_writes_nothing(engine, tmp_path, sample_dir):
    before = _counts(engine)
    (summary,) = importing.import_path(engine, sample_dir, dry_run=True, actor=SYSTEM)
    assert (summary.kind, summary.new) == ("items", 7)
    roster = _csv(tmp_path)
    assert importing.import_roster(engine, roster, dry_run=True, actor=SYSTEM).new == 3
    assert _counts(engine) == before
    importing.import_items(engine, sample_dir, actor=SYSTEM)
    assert importing.import_items(engine, sample_dir, dry_run=True, actor=SYSTEM).unchanged == 7


def test_roster_reimport_with_fewer_columns_keeps_the_other_fields(engine, tmp_path):
    full = _csv(tmp_path)
    importing.import_roster(engine, full, actor=SYSTEM)
    short = _csv(tmp_path, "username,display_name\nrev01,Dr One Renamed\nrev02,Dr Two\n", "short.csv")
    summary = importing.import_roster(engine, short, actor=SYSTEM)
    assert (summary.new, summary.updated, summary.unchanged) == (0, 1, 1)
    one, two = accounts.get_user(engine, "rev01"), accounts.get_user(engine, "rev02")
    assert one.display_name == "Dr One Renamed"
    assert (one.role, one.profession, one.country, one.years_experience, one.languages) == (
        "reviewer",
        "Emergency physician",
        "Kenya",
        4,
        "en",
    )
    assert (two.languages, two.years_experience, two.profession) == ("en,zh", 7, "Internist")


def test_roster_empty_cell_clears_an_optional_field_but_never_a_required_one(engine, tmp_path):
    full = _csv(tmp_path)
    importing.import_roster(engine, full, actor=SYSTEM)
    clear = _csv(tmp_path, "username,profession,years\nrev02,,\n", "clear.csv")
    assert importing.import_roster(engine, clear, actor=SYSTEM).updated == 1
    two = accounts.get_user(engine, "rev02")
    assert (two.profession, two.years_experience, two.country, two.languages) == ("", None, "China", "en,zh")
    bad = _csv(tmp_path, "username,role\nrev02,\n", "bad.csv")
    with pytest.raises(ImportRefused) as caught:
        importing.import_roster(engine, bad, actor=SYSTEM)
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (2, "role") and "cannot be emptied" in issue.message
    new = _csv(tmp_path, "username,languages\nrev09,en\n", "new.csv")
    with pytest.raises(ImportRefused, match="missing display_name for a new account"):
        importing.import_roster(engine, new, actor=SYSTEM)


def test_roster_import_obeys_the_role_rules_of_the_importer(engine, tmp_path):
    """The reported escalation: a lead's roster set the lead's own role to admin."""
    full = _csv(tmp_path)
    importing.import_roster(engine, full, actor=SYSTEM)
    lead = Actor(accounts.get_user(engine, "lead01").id)
    studies.create_study(engine, "S", rubrics=["A"], actor=lead)
    assignment.enrol(engine, "S", ["rev01"], actor=lead)
    cases = {
        "username,role\nlead01,admin\n": ("role", "above your own"),
        "username,display_name,role\nnewlead,New Lead,lead\n": ("role", "only an admin"),
        "username,country\nrev02,Chile\n": ("username", "not a reviewer of your studies"),
        "username,role\nrev01,lead\n": ("role", "only an admin"),
    }
    for number, (text, (field, message)) in enumerate(cases.items()):
        path = tmp_path / f"case{number}.csv"
        path.write_text(text)
        with pytest.raises(ImportRefused) as caught:
            importing.import_roster(engine, path, actor=lead)
        (issue,) = caught.value.issues
        assert (issue.line, issue.field) == (2, field) and message in issue.message, (text, issue)
    assert accounts.get_user(engine, "lead01").role == "lead"
    assert accounts.get_user(engine, "rev01").role == "reviewer"
    mine = _csv(
        tmp_path,
        "username,display_name,role,country\nrev01,Dr One,reviewer,Chile\nrev03,Dr Three,reviewer,Peru\n",
        "mine.csv",
    )
    summary = importing.import_roster(engine, mine, actor=lead)
    assert (summary.new, summary.updated) == (1, 1) and summary.reviewers == ("rev01", "rev03")
    with pytest.raises(PermissionDenied, match="needs a lead or admin"):
        importing.import_roster(engine, mine, actor=Actor(accounts.get_user(engine, "rev01").id))
    admin = accounts.create_user(
        engine, accounts.UserProfile(username="adm", display_name="A", role="admin"), actor=SYSTEM
    )
    before = accounts.get_user(engine, "rev02").session_version
    promote = _csv(tmp_path, "username,role\nrev02,lead\n", "promote.csv")
    assert importing.import_roster(engine, promote, actor=Actor(admin.id)).updated == 1
    assert accounts.get_user(engine, "rev02").session_version == before + 1  # a role change ends open sessions


def test_roster_summary_names_only_reviewers_for_enrolment(engine, tmp_path):
    path = _csv(tmp_path)
    summary = importing.import_roster(engine, path, actor=SYSTEM)
    assert summary.usernames == ("rev01", "rev02", "lead01") and summary.reviewers == ("rev01", "rev02")


# ---------------------------------------------------------------- strict by default, --skip-bad-rows


def test_skip_bad_rows_imports_the_good_items_and_names_each_bad_one(engine, tmp_path):
    rows = item_rows(4, start=200)
    bad_answer = rows[1] | {"answer": "Z"}
    listed = rows[2] | {"opa": ["Discharge", "home"]}
    path = write_jsonl(tmp_path / "items.jsonl", [rows[0], bad_answer, listed, '{"id": ', rows[3]])
    before = _counts(engine)
    with pytest.raises(ImportRefused) as refused:  # strict by default: every bad row named, nothing written
        importing.import_items(engine, path, actor=SYSTEM)
    assert [(i.line, i.field) for i in refused.value.issues] == [(2, "answer"), (3, "opa"), (4, None)]
    assert "--skip-bad-rows" in str(refused.value) and _counts(engine) == before
    summary = importing.import_items(engine, path, actor=SYSTEM, skip_bad_rows=True)
    assert (summary.rows, summary.new) == (2, 2)
    assert [i.line for i in summary.skipped] == [2, 3, 4] and "3 bad row(s) skipped" in str(summary)
    with read_session(engine) as session:
        stored = set(session.exec(select(Item.external_id)))
    assert stored == {rows[0]["id"], rows[3]["id"]}


def test_skip_bad_rows_refuses_a_file_without_one_good_row(engine, tmp_path):
    path = write_jsonl(tmp_path / "items.jsonl", [item_rows(1)[0] | {"answer": "Z"}])
    before = _counts(engine)
    with pytest.raises(ImportRefused, match="No row of the file can be imported"):
        importing.import_items(engine, path, actor=SYSTEM, skip_bad_rows=True)
    assert _counts(engine) == before


def test_skip_bad_rows_never_skips_a_file_in_the_wrong_encoding(engine, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_bytes(json.dumps(item_rows(1)[0]).encode() + b'\n{"id": "caf\xe9"}\n')
    with pytest.raises(ImportRefused, match=r"items.jsonl:2: .*UTF-8"):
        importing.import_items(engine, path, actor=SYSTEM, skip_bad_rows=True)


def test_skip_bad_rows_for_responses_and_roster(engine, tmp_path):
    items = item_rows(2)
    importing.import_items(engine, write_jsonl(tmp_path / "items.jsonl", items), actor=SYSTEM)
    responses = response_rows(items, models=("model-a",))
    responses[1] = responses[1] | {"model": "m" * 300}
    path = write_jsonl(tmp_path / "responses.jsonl", responses)
    with pytest.raises(ImportRefused, match=r"responses.jsonl:2: field 'model': the value is 300 characters"):
        importing.import_responses(engine, path, actor=SYSTEM)
    summary = importing.import_responses(engine, path, actor=SYSTEM, skip_bad_rows=True)
    assert (summary.new, [(i.line, i.field) for i in summary.skipped]) == (1, [(2, "model")])
    roster = _csv(tmp_path, "username,display_name,role\nnew1,New One,reviewer\nnew2,New Two,superuser\n")
    summary = importing.import_roster(engine, roster, actor=SYSTEM, skip_bad_rows=True)
    assert summary.usernames == ("new1",) and [(i.line, i.field) for i in summary.skipped] == [(3, "role")]


def test_a_refused_account_rule_leaves_nothing_of_its_row_when_skipping(engine, tmp_path):
    lead = accounts.create_user(
        engine, accounts.UserProfile(username="lead1", display_name="Lead", role="lead"), actor=SYSTEM
    )
    roster = _csv(tmp_path, "username,display_name,role\nnew1,New One,reviewer\nboss,Boss,admin\n")
    summary = importing.import_roster(engine, roster, actor=Actor(lead.id), skip_bad_rows=True)
    assert summary.usernames == ("new1",) and summary.skipped[0].line == 3
    with read_session(engine) as session:
        assert session.exec(select(Reviewer).where(Reviewer.username == "boss")).first() is None


def test_roster_with_a_new_study_is_one_transaction(engine, tmp_path):
    roster = _csv(tmp_path, "username,display_name,role\nnew1,New One,reviewer\nnew2,New Two,reviewer\n")
    before = _counts(engine)
    with pytest.raises(importing.InvalidInput, match="at most 200"):
        importing.import_into_study(engine, roster, study="s" * 300, actor=SYSTEM)
    assert _counts(engine) == before  # no reviewer, no import batch (PostgreSQL committed both before)
    done = importing.import_into_study(engine, roster, study="Pilot", actor=SYSTEM)
    assert done.created and done.enrolled == ("new1", "new2")
    assert studies.get_study(engine, "Pilot").name == "Pilot"


def test_values_the_database_cannot_store_are_refused_the_same_on_both_backends(engine, tmp_path):
    rows = item_rows(2, start=300)
    rows[0] = rows[0] | {"id": "i" * 201}
    rows[1] = rows[1] | {"question": "nul\u0000inside"}
    with pytest.raises(ImportRefused) as refused:
        importing.import_items(engine, write_jsonl(tmp_path / "items.jsonl", rows), actor=SYSTEM)
    assert [(i.line, i.field) for i in refused.value.issues] == [(1, "id"), (2, "question")]


def test_an_empty_file_is_refused_and_leaves_no_import_batch(engine, tmp_path):
    before = _counts(engine)
    for name, content in (("items.jsonl", ""), ("responses.jsonl", "\n\n"), ("items.json", "[]")):
        path = tmp_path / name
        path.write_text(content)
        kind = "responses" if name.startswith("responses") else "items"
        with pytest.raises(ImportRefused, match=r"empty|no rows"):
            importing.import_path(engine, path, kind=kind, actor=SYSTEM)
    assert _counts(engine) == before


def test_a_run_whose_last_result_was_cut_short_is_refused_unless_skipping(engine, tmp_path):
    import shutil
    from pathlib import Path

    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "medmisbench_old_run", run)
    results = run / "results.jsonl"
    data = results.read_bytes().rstrip(b"\n")
    results.write_bytes(data[: len(data) - 40])  # a kill in the middle of the last write
    before = _counts(engine)
    with pytest.raises(ImportRefused, match=r"results.jsonl:21: the last line is cut short"):
        importing.import_run(engine, run, actor=SYSTEM)
    assert _counts(engine) == before
    items, responses = importing.import_run(engine, run, actor=SYSTEM, skip_bad_rows=True)
    assert items.new == 7 and [i.line for i in responses.skipped] == [21] and responses.new >= 19


def test_labels_with_rich_markup_import_and_print_as_typed(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from review_app.cli import app
    from review_app.db.connect import dispose_engines

    monkeypatch.setenv("MEDREV_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    rows = [item_rows(1)[0] | {"id": "[/b]odd [bold]id", "question": "Is [/b] a tag?"}]
    path = write_jsonl(tmp_path / "MEDMISQA [v2].jsonl", rows)
    try:
        result = CliRunner().invoke(app, ["review", "import", str(path), "--kind", "items"])
    finally:
        dispose_engines()
    assert result.exit_code == 0, result.output
    assert "MEDMISQA [v2].jsonl: 1 new" in result.output


@pytest.mark.parametrize(
    "bad",
    [
        {"question": ["Which?", "x"]},
        {"opb": {"text": "x"}},
        {"injection_content": "[b]Cue Remapping[/b]"},
        {"injection_provenance": "<i>Neutral</i>"},
        {"answer": "F"},
        {"injectc": "", "opc": "", "injecte": "a sentence for no option"},
    ],
    ids=["list-question", "object-option", "markup-content", "html-provenance", "gold-not-an-option", "stray-sentence"],
)
def test_review_import_and_bench_run_refuse_a_row_with_the_same_message(tmp_path, bad):
    """One validation for every reader: the importer's issues are the benchmark loader's, word for word (under
    medrev's reading; the cell checks hold under the authors' reading too, which evaluates an invalid item)."""
    from bench_core.medmisbench.data import load_medmisbench

    path = write_jsonl(tmp_path / "MEDMISQA.jsonl", [GOOD[1], GOOD[0] | {"id": "x"} | bad])
    _rows, issues = importing.prepare_items(path)
    bench = load_medmisbench(path).issues
    assert issues == bench and len(issues) == 1 and issues[0].line == 2
    authors = load_medmisbench(path, reading="authors")
    if issues[0].field in ("question", "opb", "injection_content", "injection_provenance"):
        assert authors.issues == bench  # a cell no reader can use
    else:
        assert [(w.line, w.field) for w in authors.warnings] == [(2, issues[0].field)]  # evaluated, and named
