"""Report outputs: the stable JSON keys, CSV, LaTeX and figures all show the metrics' numbers."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from rich.console import Console

from bench_core.cli.medmisbench import print_report
from bench_core.medmisbench.metrics import medmisbench_report
from bench_core.medmisbench.report import (
    build_figures,
    latex_escape,
    latex_tables,
    metric_rows,
    write_report,
)
from tests.bench_core.medmisbench.test_metrics import _run_data

CONTRACT_CONDITION_KEYS = {
    "clean": {"n", "accuracy", "accuracy_ci", "n_unparseable"},
    "type1": {"n", "accuracy", "accuracy_ci", "n_unparseable", "asr", "asr_ci", "tasr", "tasr_ci", "n_clean_correct"},
    "type2": {"n", "accuracy", "accuracy_ci", "n_unparseable", "asr", "asr_ci", "n_clean_correct"},
    "type1_defensive": {"n", "accuracy", "accuracy_ci", "n_unparseable", "asr", "asr_ci", "tasr", "tasr_ci"},
}


@pytest.fixture
def report():
    return medmisbench_report(_run_data(models=("gpt_5.4 100%", "m2")))


def test_json_has_the_spec_keys(report):
    assert {"benchmark", "models", "skipped"} <= set(report)
    assert report["benchmark"] == "medmisbench"
    for model in report["models"].values():
        assert {"conditions", "strata"} <= set(model)
        for condition, keys in CONTRACT_CONDITION_KEYS.items():
            assert keys <= set(model["conditions"][condition]), condition
        assert set(model["strata"]) == {"subset", "content", "provenance", "content_x_provenance"}
        for values in model["strata"].values():
            for conditions in values.values():
                for condition, keys in CONTRACT_CONDITION_KEYS.items():
                    assert keys <= set(conditions[condition])
    assert all(set(s) == {"item_id", "reason"} for s in report["skipped"])
    json.dumps(report)  # serialisable as is


def test_csv_rows_carry_counts_and_intervals(report, tmp_path):
    rows = list(metric_rows(report))
    overall_asr = next(
        r
        for r in rows
        if r["model"] == "m2" and r["stratum"] == "overall" and r["condition"] == "type2" and r["metric"] == "asr"
    )
    assert (overall_asr["k"], overall_asr["n"], overall_asr["rate"]) == (1, 3, 1 / 3)
    assert overall_asr["ci_low"] == pytest.approx(0.0615, abs=1e-4)
    write_report(report, tmp_path, figures=False)
    with (tmp_path / "metrics.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)
    assert json.loads((tmp_path / "report.json").read_text()) == report


def test_latex_is_booktabs_and_escaped(report):
    assert latex_escape("gpt_5.4 100% & co #1") == r"gpt\_5.4 100\% \& co \#1"
    tables = latex_tables(report)
    asr = tables["type1_asr"]
    assert r"\toprule" in asr and r"\midrule" in asr and r"\bottomrule" in asr
    assert r"gpt\_5.4 100\% & 100.0 & 100.0 & 100.0 \\" in asr  # MedMisMCQA, MedMisQA, Overall
    assert r"Mean & 100.0 & 100.0 & 100.0 \\" in asr
    assert "Authority (Guideline / Discharge Note / SOP)" in tables["asr_by_provenance"]


def test_terminal_report_and_figures(report, tmp_path):
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    assert "gpt_5.4 100%" in text and "33.3 (6.1–79.2)" in text
    figures = build_figures(report)
    assert set(figures) == {"accuracy_by_condition", "asr_heatmap_content_x_provenance", "radar_clean_vs_asr_tasr"}
    heat = figures["asr_heatmap_content_x_provenance"].data[0]
    assert heat.z[[c for c in heat.y].index("Exception Poisoning")][2] == 1.0  # i1: authority, flipped


@pytest.mark.skipif(shutil.which("chromium") is None, reason="PNG export needs Debian's chromium")
def test_png_export(report, tmp_path):
    written = write_report(report, tmp_path)
    pngs = [p for p in written if p.suffix == ".png"]
    assert len(pngs) == 3 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
