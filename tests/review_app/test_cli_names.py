"""Names with Rich markup (``[/]``, ``[bold]``) or Markdown never crash the CLI and print as typed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from review_app.cli import app
from review_app.db.connect import dispose_engines, get_engine

runner = CliRunner()
STUDY = "[/]trial [bold]x[/bold] ![i](http://203.0.113.9/p.png)"
DISPLAY = "[/] [red]Dr[/red] **House**"


@pytest.fixture
def cli_db(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("MEDREV_DATABASE_URL", url)
    get_engine(url)  # the database exists: commands other than import / create refuse a missing file
    yield
    dispose_engines()


def medrev(*args: str, input: str | None = None):
    result = runner.invoke(app, list(args), input=input)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_markup_in_names_prints_literally(cli_db):
    out = medrev("review", "study", "create", STUDY, "--rubrics", "A")
    assert out.exit_code == 0 and f"created study {STUDY!r}" in out.output
    listing = medrev("review", "study", "list")
    assert listing.exit_code == 0 and "[/]trial [bold]x[/bold]" in listing.output
    status = medrev("review", "status")
    assert status.exit_code == 0 and f"{STUDY}: 0/0 tasks complete" in status.output
    assert json.loads(medrev("review", "status", "--study", STUDY, "--json").output)["study"] == STUDY
    out = medrev("review", "user", "add", "rev9", "--display-name", DISPLAY, "--no-password")
    assert out.exit_code == 0 and "created reviewer 'rev9'" in out.output
    users = medrev("review", "user", "list")
    assert users.exit_code == 0 and "[/]" in users.output and "[red]" in users.output


def test_an_error_quoting_a_name_with_markup_is_printed_as_is(cli_db):
    out = medrev("review", "pool", "--study", "[/]nope [bold]", "--size", "3")
    assert out.exit_code == 2
    assert out.stderr.strip() == "error: no study named '[/]nope [bold]'"
