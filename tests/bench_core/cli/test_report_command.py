"""``bench report`` recognises every kind of run directory and reports each with its design."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from bench_core.cli.main import app

TROJAN_SAMPLE = Path(__file__).resolve().parents[2] / "data" / "trojan" / "standardized_analysis_sample.json"


def test_bench_report_recognises_every_kind_of_run_directory(fake_openai, tmp_path, sample_dir):
    from tests.bench_core.healthcontradict.test_e2e import _book, _instances
    from tests.fakes.openai_server import Reply, ScriptedPolicy

    book = _book()
    server = fake_openai(ScriptedPolicy(lambda text, received: book.get(text, Reply(content="Score: 0"))))
    runs = tmp_path / "runs"
    data = tmp_path / "hc.jsonl"
    data.write_text("".join(json.dumps(i.model_dump()) + "\n" for i in _instances()))
    common = ["--model", "m", "--base-url", server.url, "--no-progress"]
    invocations = [
        ["healthcontradict", "--data", str(data), "--out", str(runs / "hc"), "--templates", "NC,CC"],
        ["trojan", "--data", str(TROJAN_SAMPLE), "--judge-model", "j", "--out", str(runs / "tj")],
        [
            "medmisbench",
            "--data",
            str(sample_dir / "MEDMISQA.jsonl"),
            "--out",
            str(runs / "mm"),
            "--conditions",
            "clean",
        ],
    ]
    for args in invocations:
        result = CliRunner().invoke(app, ["run", *args, *common])
        assert result.exit_code == 0, result.output
    reported = CliRunner().invoke(app, ["report", str(runs), "--json"])
    assert reported.exit_code == 0, reported.output
    kinds = {json.loads(line)["benchmark"]: json.loads(line) for line in reported.stdout.splitlines()}
    assert set(kinds) == {"healthcontradict", "trojan", "medmisbench"}
    assert kinds["trojan"]["models"]["m"]["neutral"] == 5
    assert kinds["healthcontradict"]["models"]["m"]["templates"]["CC"]["accuracy"] == 1.0
    printed = CliRunner().invoke(app, ["report", str(runs / "tj"), "--no-figures"])
    assert printed.exit_code == 0 and (runs / "tj" / "report" / "results.tex").exists()
    empty = CliRunner().invoke(app, ["report", str(tmp_path)])  # run directories only two levels down
    assert empty.exit_code == 2 and "is not a run directory" in " ".join(empty.output.split())
