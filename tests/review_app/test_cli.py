"""The `medrev review` and `medrev db` commands, end to end on a real database file."""

import json

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from review_app.cli import app
from review_app.db.connect import dispose_engines, get_engine

from .factories import item_rows, response_rows, write_jsonl

runner = CliRunner()


@pytest.fixture
def cli_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("MEDREV_DATABASE_URL", url)
    get_engine(url)  # the database exists: commands other than import / create refuse a missing file
    yield url
    dispose_engines()


def medrev(*args, input=None):
    result = runner.invoke(app, [str(a) for a in args], input=input)
    return result


def test_help_reads_well():
    result = medrev("--help")
    assert result.exit_code == 0
    for group in ("review", "db", "demo"):
        assert group in result.output
    review = medrev("review", "--help")
    for command in ("import", "pool", "assign", "status", "user", "study", "reassign"):
        assert command in review.output


def test_study_setup_from_the_command_line(cli_db, tmp_path, sample_dir):
    assert medrev("db", "upgrade").exit_code == 0
    items = item_rows(30)
    write_jsonl(tmp_path / "items.jsonl", items)
    write_jsonl(tmp_path / "responses.jsonl", response_rows(items))
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "username,display_name,role,profession,country,years,languages\n"
        + "".join(f'r{i},Dr {i},reviewer,GP,Peru,{i},"en{";zh" if i < 2 else ""}"\n' for i in range(6))
    )
    out = medrev("review", "import", tmp_path / "items.jsonl")
    assert out.exit_code == 0, out.output
    assert "30 new" in out.output
    assert "7 new" in medrev("review", "import", sample_dir).output
    assert "90 new" in medrev("review", "import", tmp_path / "responses.jsonl").output
    out = medrev("review", "import", roster, "--study", "pilot")
    assert out.exit_code == 0 and "enrolled 6" in out.output, out.output
    out = medrev(
        "review",
        "pool",
        "--study",
        "pilot",
        "--size",
        "20",
        "--seed",
        "3",
        "--quota",
        "provenance=neutral:1,patient:1,authority:1",
    )
    assert out.exit_code == 0, out.output
    assert "20 units, 40 tasks" in out.output
    out = medrev("review", "assign", "--study", "pilot", "--raters", "2", "--dual-share", "0.5")
    assert out.exit_code == 0 and "10 multi-rated" in out.output, out.output
    status = json.loads(medrev("review", "status", "--study", "pilot", "--json").output)
    assert status["tasks"] == 40 and status["complete_tasks"] == 0
    assert sum(r["assigned"] for r in status["by_reviewer"]) == 60
    out = medrev("review", "reassign", "--study", "pilot", "--from", "r3")
    assert out.exit_code == 0 and "left pilot" in out.output


def test_user_add_and_passwd_never_echo_the_password(cli_db):
    out = medrev("review", "user", "add", "lead1", "--role", "lead", "--password-stdin", input="s3cret-passphrase\n")
    assert out.exit_code == 0 and "s3cret" not in out.output
    listing = json.loads(medrev("review", "user", "list", "--json").output)
    assert listing[0]["username"] == "lead1" and "password" not in json.dumps(listing)
    out = medrev("review", "user", "passwd", "lead1", "--password-stdin", input="short\n")
    assert out.exit_code == 2 and "at least 10 characters" in out.output


def test_bad_input_gives_a_clear_message_and_exit_code_2(cli_db, tmp_path):
    bad = write_jsonl(tmp_path / "MEDMISQA.jsonl", [item_rows(1)[0] | {"answer": "Z"}])
    out = medrev("review", "import", bad)
    assert out.exit_code == 2
    assert "MEDMISQA.jsonl:1" in out.output and "'answer'" in out.output and "Traceback" not in out.output
    out = medrev("review", "user", "add", "x1", "--role", "king", "--no-password")
    assert out.exit_code == 2 and "unknown role" in out.output
    out = medrev("review", "pool", "--study", "nope", "--size", "3")
    assert out.exit_code == 2 and "no study named 'nope'" in out.output


def test_roster_import_with_study_enrols_only_reviewers(cli_db, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "username,display_name,role\nr1,Dr One,reviewer\nr2,Dr Two,reviewer\nl1,Lead One,lead\nadm,Admin,admin\n"
    )
    out = medrev("review", "import", roster, "--study", "pilot")
    assert out.exit_code == 0 and "enrolled 2 reviewer(s)" in out.output, out.output
    from review_app.db.connect import get_engine
    from review_app.db.engine import read_session
    from review_app.db.models import Enrollment, Reviewer

    with read_session(get_engine()) as session:
        enrolled = session.exec(
            select(Reviewer.username)
            .join(Enrollment, Enrollment.reviewer_id == Reviewer.id)
            .order_by(Reviewer.username)
        ).all()
    assert enrolled == ["r1", "r2"]


def test_the_operator_acts_with_every_right_and_as_runs_under_an_accounts_rules(cli_db):
    assert medrev("review", "user", "add", "l1", "--role", "lead", "--no-password").exit_code == 0
    assert medrev("review", "user", "add", "boss", "--role", "admin", "--no-password").exit_code == 0
    out = medrev("review", "--as", "l1", "user", "add", "boss2", "--role", "admin", "--no-password")
    assert out.exit_code == 2 and "above your own" in out.output and "Traceback" not in out.output
    out = medrev("review", "--as", "l1", "user", "passwd", "boss", "--password-stdin", input="a long new password\n")
    assert out.exit_code == 2 and "only an admin" in out.output
    out = medrev("review", "--as", "l1", "user", "add", "rx", "--role", "reviewer", "--no-password")
    assert out.exit_code == 0, out.output
    out = medrev("review", "--as", "l1", "study", "create", "mine", "--rubrics", "A")
    assert out.exit_code == 0, out.output
    assert "leads of 'mine': l1" in medrev("review", "--as", "l1", "study", "lead", "mine", "l1").output
    out = medrev("review", "--as", "nobody", "study", "list")
    assert out.exit_code == 2 and "no user named 'nobody'" in out.output
    assert medrev("review", "user", "role", "l1", "--role", "reviewer").exit_code == 0
    out = medrev("review", "--as", "l1", "study", "create", "again")
    assert out.exit_code == 2 and "needs a lead or admin" in out.output


@pytest.mark.parametrize(
    ("args", "env", "host"),
    [
        ((), {}, "127.0.0.1"),  # a hospital server: only its reverse proxy on the same host reaches the app
        (("--host", "0.0.0.0"), {}, "0.0.0.0"),
        ((), {"STREAMLIT_SERVER_ADDRESS": "10.1.2.3"}, "10.1.2.3"),
    ],
)
def test_app_serves_loopback_unless_told_otherwise_and_prints_where(cli_db, tmp_path, monkeypatch, args, env, host):
    from streamlit import config

    from review_app.ui import server

    started = []
    monkeypatch.delenv("STREAMLIT_SERVER_ADDRESS", raising=False)
    monkeypatch.setattr(server, "run_app", lambda address, url: started.append(address))
    with monkeypatch.context() as here:
        here.chdir(tmp_path)  # no .streamlit/config.toml naming an address
        out = runner.invoke(app, ["app", "--port", "8765", *args], env=env)
    config.get_config_options(force_reparse=True)  # listen_address parsed Streamlit's options in-process
    assert out.exit_code == 0, out.output
    assert started == [server.ListenAddress(host, 8765)]
    assert out.output.startswith(f"Review app on http://{host}:8765")


def test_as_reads_only_what_the_account_may_open(cli_db):
    for name, role in (("l1", "lead"), ("l2", "lead"), ("r1", "reviewer")):
        assert medrev("review", "user", "add", name, "--role", role, "--no-password").exit_code == 0
    for study, lead in (("mine", "l1"), ("theirs", "l2")):
        assert medrev("review", "study", "create", study, "--rubrics", "A").exit_code == 0
        assert medrev("review", "study", "lead", study, lead).exit_code == 0
    listed = medrev("review", "--as", "l1", "study", "list")
    assert listed.exit_code == 0 and "mine" in listed.output and "theirs" not in listed.output
    assert "theirs" in medrev("review", "study", "list").output  # the operator lists every study
    status = medrev("review", "--as", "l1", "status", "--json")
    assert status.exit_code == 0, status.output
    assert [report["study"] for report in json.loads(status.output)] == ["mine"]
    out = medrev("review", "--as", "l1", "status", "--study", "theirs")
    assert out.exit_code == 2 and "Traceback" not in out.output and "theirs" in out.output
    out = medrev("review", "--as", "r1", "status", "--json")
    assert out.exit_code == 0 and json.loads(out.output) == []
    out = medrev("review", "--as", "r1", "status")
    assert out.exit_code == 0 and "No study here is led by the account named by --as" in out.output
    assert [r["study"] for r in json.loads(medrev("review", "status", "--json").output)] == ["mine", "theirs"]
