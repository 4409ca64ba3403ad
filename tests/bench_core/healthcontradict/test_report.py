"""HealthContradict report outputs (terminal, CSV, LaTeX, figures) show the metrics' numbers."""

from __future__ import annotations

import csv
import json

import pytest
from rich.console import Console

from bench_core.cli.healthcontradict import print_report
from bench_core.healthcontradict import report as hc
from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.metrics import healthcontradict_report
from bench_core.healthcontradict.run import HCRunData
from tests.bench_core.healthcontradict.test_metrics import GOLD, TOPIC, _predictions


@pytest.fixture(scope="module")
def hc_report():
    instances = [
        HCInstance(instance_id=f"i{k}", topic_id=TOPIC[k], query="Q?", query_stance=GOLD[k], doc_a="a", doc_b="b")
        for k in range(8)
    ]
    return healthcontradict_report(HCRunData(instances, _predictions("llama_3.1 8B") + _predictions("m2"), [], 0))


def test_hc_json_csv_latex_and_terminal(hc_report, tmp_path):
    json.dumps(hc_report)
    console = Console(record=True, width=200)
    print_report(hc_report, console)
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
        "macro_f1_by_context_quartile.tex",  # Fig. 7 as a table
        "model_mcnemar.tex",  # two models: McNemar between them per template
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
        "macro_f1_by_context_quartile",  # the paper's Fig. 7
    }
    bars = figures["accuracy_macro_f1_by_template"].data[0]
    assert list(bars.y) == [0.5, 0.625, 0.25, 0.75, 0.75]
    heat = figures["agreement_heatmap"].data[0]
    assert heat.z[0][1] == 5 / 8 and heat.z[1][0] == 5 / 8 and heat.z[0][0] == 1.0
