"""HealthContradict and Trojan report outputs (terminal, CSV, LaTeX, figures) show the metrics' numbers,
and ``bench report`` recognises every kind of run directory."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from bench_core.cli.main import app
from bench_core.healthcontradict import report as hc
from bench_core.healthcontradict.data import HCInstance
from bench_core.healthcontradict.metrics import healthcontradict_report
from bench_core.healthcontradict.run import HCRunData
from bench_core.trojan import report as tj
from bench_core.trojan.metrics import trojan_report
from bench_core.trojan.run import TrojanRunData, TrojanTrace
from tests.bench_core.healthcontradict.test_metrics import GOLD, TOPIC, _predictions

TROJAN_SAMPLE = Path(__file__).resolve().parents[2] / "data" / "trojan" / "standardized_analysis_sample.json"


@pytest.fixture(scope="module")
def hc_report():
    instances = [
        HCInstance(instance_id=f"i{k}", topic_id=TOPIC[k], query="Q?", query_stance=GOLD[k], doc_a="a", doc_b="b")
        for k in range(8)
    ]
    return healthcontradict_report(HCRunData(instances, _predictions("llama_3.1 8B") + _predictions("m2"), [], 0))


def _trace(record_id: str, model: str, label: int | None, status: str) -> TrojanTrace:
    return TrojanTrace(
        record_id=record_id,
        title="t",
        conclusion="c",
        problem="p",
        note="n",
        isimpact=True,
        model=model,
        model_name=model,
        endpoint="http://x/v1",
        prompt="prompt",
        model_response="answer",
        judge_model="judge-x",
        judge_prompt="judge prompt",
        judge_label=label,
        judge_rationale="r",
        status=status,
    )


@pytest.fixture(scope="module")
def trojan_report_dict():
    # model_a: the seed's claude-haiku-4-5 row (1 recognized, 86 neutral, 13 polluted) plus 2 flagged
    traces = [_trace(f"r{k}", "model_a", -1, "scored") for k in range(1)]
    traces += [_trace(f"r{k}", "model_a", 0, "scored") for k in range(1, 87)]
    traces += [_trace(f"r{k}", "model_a", 1, "scored") for k in range(87, 100)]
    traces += [_trace(f"f{k}", "model_a", None, "flagged") for k in range(2)]
    traces += [_trace("r0", "model_b", 0, "scored"), _trace("r1", "model_b", None, "answer_failed")]
    return trojan_report(TrojanRunData([], traces, {"provenance": {"source_url": "https://k", "sha256": "ab" * 32}}))


def test_hc_json_csv_latex_and_terminal(hc_report, tmp_path):
    json.dumps(hc_report)
    console = Console(record=True, width=200)
    hc.print_report(hc_report, console)
    text = console.export_text()
    assert "llama_3.1 8B" in text and "62.5 (30.6–86.3)" in text  # CC accuracy 5/8 with its Wilson CI
    assert "[2/4]" in text and "[3/4]" in text  # OR and VM counts
    tables = hc.latex_tables(hc_report)
    assert (
        r"llama\_3.1 8B & 50.0 & 50.0 & 62.5 & 56.4 & 25.0 & 20.0 & 75.0 & 80.0 & 75.0 & 42.9 \\"
        in tables["accuracy_macro_f1"]
    )
    assert r"m2 & 50.0 & 2/4 & 75.0 & 3/4 \\" in tables["failure_modes"]
    assert r"NC-IC & 0.617 & 0.617 \\" in tables["mcnemar"]
    written = hc.write_report(hc_report, tmp_path, figures=False)
    assert {p.name for p in written} == {
        "report.json",
        "metrics.csv",
        "accuracy_macro_f1.tex",
        "failure_modes.tex",
        "mcnemar.tex",
    }
    with (tmp_path / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    vm = next(r for r in rows if r["model"] == "m2" and r["name"] == "VM")
    assert (vm["value"], vm["k"], vm["n"]) == ("0.75", "3", "4")
    assert json.loads((tmp_path / "report.json").read_text()) == hc_report


def test_hc_figures(hc_report):
    figures = hc.build_figures(hc_report)
    assert set(figures) == {
        "accuracy_macro_f1_by_template",
        "probability_density",
        "agreement_heatmap",
        "accuracy_by_context_quartile",
    }
    bars = figures["accuracy_macro_f1_by_template"].data[0]
    assert list(bars.y) == [0.5, 0.625, 0.25, 0.75, 0.75]
    heat = figures["agreement_heatmap"].data[0]
    assert heat.z[0][1] == 5 / 8 and heat.z[1][0] == 5 / 8 and heat.z[0][0] == 1.0


def test_trojan_table_like_the_seed(trojan_report_dict, tmp_path):
    model_a = trojan_report_dict["models"]["model_a"]
    assert (model_a["normalized_score"], model_a["polluted_rate"], model_a["flagged"]) == (44.0, 0.13, 2)
    console = Console(record=True, width=200)
    tj.print_report(trojan_report_dict, console)
    text = console.export_text()
    assert "model_a" in text and "44.0000" in text and "0.0714" in text
    rows = tj.latex_tables(trojan_report_dict)["results"]
    assert r"model\_a & 44.0000 & 0.1300 & 0.0714 & 1 & 86 & 13 & 100 & 2 & 0 \\" in rows
    assert r"model\_b & 50.0000 & 0.0000 & – & 0 & 1 & 0 & 1 & 0 & 1 \\".replace("–", "--") in rows
    written = tj.write_report(trojan_report_dict, tmp_path, figures=False)
    with (tmp_path / "metrics.csv").open() as handle:
        csv_rows = list(csv.DictReader(handle))
    assert [r["model"] for r in csv_rows] == ["model_a", "model_b"] and csv_rows[1]["antipollution_rate"] == ""
    assert len(written) == 3
    figures = tj.build_figures(trojan_report_dict)
    assert list(figures["judge_labels"].data[2].y) == [13, 0]  # polluted per model


@pytest.mark.skipif(shutil.which("chromium") is None, reason="PNG export needs Debian's chromium")
def test_png_export(trojan_report_dict, tmp_path):
    written = tj.write_report(trojan_report_dict, tmp_path)
    pngs = [p for p in written if p.suffix == ".png"]
    assert len(pngs) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


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
