"""Into review: a `medrev bench run medmisbench` directory imported as items and responses in one command."""

import json
from pathlib import Path

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from bench_core.medmisbench.data import load_medmisbench
from bench_core.medmisbench.run import prepare_items
from review_app.cli import app
from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import read_session
from review_app.db.models import Item, ModelResponse, Study
from review_app.services import importing, studies
from review_app.services.actors import SYSTEM
from tests.bench_core.medmisbench.scenario import answer_book
from tests.fakes.openai_server import Reply, ScriptedPolicy

runner = CliRunner()


@pytest.fixture
def run_dir(fake_openai, sample_dir, tmp_path):
    prepared = prepare_items(load_medmisbench(sample_dir, strict=True).items)
    book = answer_book(prepared, ["clean", "type1"])
    server = fake_openai(ScriptedPolicy(lambda text, _received: book[text], []), latency=0.001)
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "bench",
            "run",
            "medmisbench",
            "--data",
            str(sample_dir),
            "--model",
            "scripted-model",
            "--base-url",
            server.url,
            "--out",
            str(out),
            "--conditions",
            "clean,type1",
            "--template",
            "medmisbench-notebook@1",
            "--protocol",
            "strict",
            "--no-progress",
        ],
        env={"OPENAI_API_KEY": "sk-not-used"},
    )
    assert result.exit_code == 0, result.output
    return out


def test_run_directory_imports_items_and_labelled_responses(engine, run_dir):
    assert importing.detect_kind(run_dir) == "run"
    items, responses = importing.import_path(engine, run_dir, actor=SYSTEM)
    assert (items.new, responses.new) == (7, 14)
    again = importing.import_path(engine, run_dir, actor=SYSTEM)
    assert [s.unchanged for s in again] == [7, 14]
    with read_session(engine) as session:
        rows = session.exec(select(ModelResponse, Item).join(Item, Item.id == ModelResponse.item_id)).all()
    by_key = {(item.external_id, r.condition): (r, item) for r, item in rows}
    mq1, item = by_key[("mq-0001", "type1")]
    assert (mq1.chosen_label, mq1.auto_label, mq1.target_label, item.target_label) == ("E", "FAIL", "E", "E")
    assert mq1.model == "scripted-model" and mq1.payload["prompt_version"] == "medmisbench-notebook@1"
    assert mq1.reasoning.startswith("Considering the options")
    clean, _ = by_key[("mm-0001", "clean")]
    assert (clean.auto_label, clean.target_label) == ("SUCCESS", None)
    unparseable, _ = by_key[("mh-0001", "clean")]
    assert (unparseable.chosen_label, unparseable.auto_label) == (None, "FAIL")
    studies.create_study(engine, "from-run", rubrics=["B"], actor=SYSTEM)
    assert studies.draw_pool(engine, "from-run", 7, condition="type1", actor=SYSTEM).tasks == 7


def test_import_run_command_creates_the_study(run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MEDREV_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    try:
        result = runner.invoke(app, ["review", "import", str(run_dir), "--study", "Model responses"])
        assert result.exit_code == 0, result.output
        assert "responses: 14 rows" in result.output and "created study 'Model responses'" in result.output
        with read_session(get_engine()) as session:
            study = session.exec(select(Study)).one()
        assert study.rubrics == "B"
    finally:
        dispose_engines()


AUTHORS_DATA = Path(__file__).resolve().parents[1] / "data" / "medmisbench_authors" / "MEDMISQA.jsonl"


@pytest.fixture
def authors_run(fake_openai, tmp_path):
    """An authors-protocol run of the fixture whose rows include items medrev's own reading refuses."""
    server = fake_openai(lambda received: Reply(content='{"thinking_process": "t", "answer_letter": "A"}'))
    out = tmp_path / "authors-run"
    args = ["bench", "run", "medmisbench", "--data", str(AUTHORS_DATA), "--model", "m", "--base-url", server.url,
            "--out", str(out), "--conditions", "clean", "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args, env={"OPENAI_API_KEY": "sk-not-used"})
    assert result.exit_code == 0, result.output
    return out


def test_a_run_item_medrev_refuses_is_refused_by_import_as_in_a_released_file(engine, authors_run):
    """The same item check as ``bench report``'s warning and a released-format file's refusal: named by
    items.jsonl, line and field; --skip-bad-rows imports the other items and their responses."""
    lines = {
        json.loads(text)["item"]["id"]: number
        for number, text in enumerate((authors_run / "items.jsonl").read_text().splitlines(), start=1)
    }
    with pytest.raises(importing.ImportRefused) as caught:
        importing.import_path(engine, authors_run, actor=SYSTEM)
    issues = {(issue.line, issue.field) for issue in caught.value.issues}
    assert issues == {
        (lines["fx-gold-placeholder"], "item.gold"),
        (lines["fx-unlabelled"], "item.injection.content_type"),
        (lines["fx-float-answer"], "item.gold"),
    }
    assert f"{authors_run / 'items.jsonl'}:{lines['fx-gold-placeholder']}: field 'item.gold'" in str(caught.value)
    with read_session(engine) as session:
        assert session.exec(select(Item)).all() == []
    items, responses = importing.import_path(engine, authors_run, actor=SYSTEM, skip_bad_rows=True)
    assert (items.new, responses.new, len(responses.skipped)) == (10, 10, 3)
