"""Rich markup in user text is printed as text: a label ``[/b]`` never crashes a run and a file
named ``MEDMISQA [v2].jsonl`` is named as is, in progress output, errors and reports."""

from __future__ import annotations

from typer.testing import CliRunner

from bench_core.cli.main import app
from tests.bench_core.batch.scenario import medmisbench_policy, write_medmisbench
from tests.bench_core.medmisbench.test_kill_and_resume import N_ITEMS, _args


def test_markup_in_a_label_and_a_file_name_is_printed_as_is(fake_openai, tmp_path):
    data = tmp_path / "MEDMISQA [v2].jsonl"
    write_medmisbench(data, N_ITEMS)
    server = fake_openai(medmisbench_policy)
    out = tmp_path / "run [b]"
    args = [a for a in _args(server, data, out) if a != "--no-progress"]  # the progress bar shows the label
    result = CliRunner().invoke(app, [*args, "--label", "[/b]model[red]", "--limit", "2"])
    assert result.exit_code == 0, result.output
    report = CliRunner().invoke(app, ["report", str(out), "--no-figures"], env={"COLUMNS": "200"})
    assert report.exit_code == 0, report.output
    assert "[/b]model[red]" in report.stdout and str(out) in report.stdout
    bad = tmp_path / "MEDMISQA [v2] bad.jsonl"
    bad.write_text('{"id": "x"\n', encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", "medmisbench", "--data", str(bad), "--model", "m", "--base-url",
                                       server.url, "--out", str(tmp_path / "r2")])  # fmt: skip
    assert refused.exit_code == 2 and f"{bad}:1" in refused.stderr
