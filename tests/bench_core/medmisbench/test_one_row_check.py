"""One row model and one validation for every reader of MedMisBench rows and items.

A released-format row is checked by ``data.check_cells`` (every cell one plain value, label cells plain
text) whatever the protocol, so ``bench run`` under ``authors`` refuses what ``strict`` and ``review
import`` refuse, with the same file, line, field and message. An item is checked by
``items.item_problems``: medrev's reading refuses it (a released-format row, a run directory's
``items.jsonl``), the authors' protocol evaluates it with a warning that names the place, in ``bench run``
and in ``bench report``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.medmisbench.data import load_medmisbench
from tests.fakes.openai_server import Reply

AUTHORS_DATA = Path(__file__).resolve().parents[2] / "data" / "medmisbench_authors" / "MEDMISQA.jsonl"
GOOD = {
    "id": "q1",
    "question": "Which drug treats condition X?",
    "answer": "A",
    "opa": "Drug A",
    "opb": "Drug B",
    "injecta": "Drug A is right.",
    "injectb": "Drug B is right.",
    "injection_content": "Cue Remapping",
    "injection_provenance": "Neutral False Statement",
}
BAD_CELLS = {
    "list-question": ({"question": ["Which drug?", "Pick one"]}, "question", "expected text, found a list"),
    "object-cell": ({"notes": {"by": "x"}}, "notes", "expected text, found an object"),
    "rich-markup-label": ({"injection_content": "[b]Cue Remapping[/b]"}, "injection_content", "carries markup"),
    "folded-markup-label": ({"injection_content": "Cue Remapping[/]"}, "injection_content", "carries markup"),
    "html-provenance": ({"injection_provenance": "<i>Neutral</i>"}, "injection_provenance", "carries markup"),
    "markup-answer": ({"answer": "[bold]A[/bold]"}, "answer", "carries markup ([bold])"),
}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(BAD_CELLS))
def test_a_bad_cell_is_refused_the_same_way_under_every_reading(tmp_path, case):
    change, field, message = BAD_CELLS[case]
    path = _write(tmp_path / "MEDMISQA.jsonl", [GOOD, {**GOOD, "id": "q2", **change}])
    found = {}
    for reading in ("authors", "medrev"):
        report = load_medmisbench(path, reading=reading)
        assert [item.id for item in report.items] == ["q1"], reading
        found[reading] = [(issue.line, issue.field, issue.message) for issue in report.issues]
    assert found["authors"] == found["medrev"]
    ((line, named, text),) = found["authors"]
    assert (line, named) == (2, field) and message in text


@pytest.mark.parametrize("protocol", ["authors", "strict"])
def test_bench_run_refuses_a_list_question_under_either_protocol_and_writes_nothing(tmp_path, protocol):
    path = _write(tmp_path / "MEDMISQA.jsonl", [GOOD, {**GOOD, "id": "q2", "question": ["Which?", "x"]}])
    out = tmp_path / "run"
    args = ["run", "medmisbench", "--data", str(path), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
            "--out", str(out), "--protocol", protocol, "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert f"{path}:2: field 'question': expected text, found a list" in " ".join(result.stderr.split())
    assert not out.exists()


def test_an_item_medrev_refuses_is_named_by_bench_run_and_bench_report_under_the_authors_protocol(
    fake_openai, tmp_path
):
    """The authors' fixture holds rows whose gold answer is no option (line 8: its option cell is a placeholder;
    line 13: "2.0", read as text); the notebook evaluates them, so does the authors protocol, and both
    ``bench run`` and ``bench report`` say where they are and why medrev's own reading refuses them."""
    server = fake_openai(lambda received: Reply(content='{"thinking_process": "t", "answer_letter": "A"}'))
    out = tmp_path / "run"
    args = ["run", "medmisbench", "--data", str(AUTHORS_DATA), "--model", "m", "--base-url", server.url,
            "--out", str(out), "--conditions", "clean", "--no-progress"]  # fmt: skip
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert f"note: {AUTHORS_DATA}:8: field 'answer': gold answer 'C' is not among the options (A, B, D)" in " ".join(
        run.stderr.split()
    )
    items = [json.loads(line)["item"]["id"] for line in (out / "items.jsonl").read_text().splitlines()]
    line = items.index("fx-gold-placeholder") + 1
    result = CliRunner().invoke(app, ["report", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    expected = (
        f"{out / 'items.jsonl'}:{line}: field 'item.gold': item 'fx-gold-placeholder': gold answer 'C' is not "
        "among the options (A, B, D)"
    )
    assert any(warning.startswith(expected) for warning in report["warnings"]), report["warnings"]
    assert f"note: {expected}" in " ".join(result.stderr.split())
    assert report["models"]["m"]["conditions"]["clean"]["n"] == 13  # still counted, as the notebook counts it
    loaded = load_medmisbench(AUTHORS_DATA, reading="authors")
    rows = {item.source_line: item.id for item in loaded.items}
    at_load = {rows[warning.line] for warning in loaded.warnings}
    named = {w.split("item '", 1)[1].split("'", 1)[0] for w in report["warnings"]}
    assert named == at_load == {"fx-gold-placeholder", "fx-unlabelled", "fx-float-answer"}  # one check, both times
