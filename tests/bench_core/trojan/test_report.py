"""Trojan report outputs (terminal, CSV, LaTeX, figures) show the metrics' numbers, laid out like the seed's table."""

from __future__ import annotations

import csv
import shutil

import pytest
from rich.console import Console

from bench_core.cli.trojan import print_report
from bench_core.trojan import report as tj
from bench_core.trojan.metrics import trojan_report
from bench_core.trojan.traces import TrojanRunData, TrojanTrace


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


def test_trojan_table_like_the_seed(trojan_report_dict, tmp_path):
    model_a = trojan_report_dict["models"]["model_a"]
    assert (model_a["normalized_score"], model_a["polluted_rate"], model_a["flagged"]) == (44.0, 0.13, 2)
    console = Console(record=True, width=200)
    print_report(trojan_report_dict, console)
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
