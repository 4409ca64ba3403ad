"""The files of a Trojan (retracted-paper contamination) report, laid out like the seed paper's results table.

Reads the dict of ``bench_core.trojan.metrics.trojan_report`` and computes nothing new.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench_core.kernel.report_files import ReportWriter, latex_table
from bench_core.kernel.rundir import RunDesign
from bench_core.trojan.metrics import trojan_report
from bench_core.trojan.run_files import BENCHMARK, is_run_dir
from bench_core.trojan.traces import read_run_data

COLUMNS = (
    "model",
    "normalized_score",
    "polluted_rate",
    "antipollution_rate",
    "recognized",
    "neutral",
    "polluted",
    "n",
    "flagged",
    "n_failed",
    "total_score",
    "avg_score",
    "judge_models",
)


def _fixed(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def results_rows(report: dict[str, Any]) -> list[list[str]]:
    return [
        [
            name,
            _fixed(m["normalized_score"]),
            _fixed(m["polluted_rate"]),
            _fixed(m["antipollution_rate"]),
            str(m["recognized"]),
            str(m["neutral"]),
            str(m["polluted"]),
            str(m["n"]),
            str(m["flagged"]),
            str(m["n_failed"]),
        ]
        for name, m in sorted(report["models"].items())
    ]


# the LaTeX table's columns: the CSV's first seven, then the counts under the paper's shorter names
HEADER = [*COLUMNS[:7], "total", "flagged", "failed"]


def metric_rows(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for name, model in sorted(report["models"].items()):
        yield {column: (name if column == "model" else model.get(column)) for column in COLUMNS} | {
            "judge_models": ";".join(model["judge_models"])
        }


def latex_tables(report: dict[str, Any]) -> dict[str, str]:
    return {
        "results": latex_table(
            "Retracted-paper contamination by model (total = items scored by the judge; flagged and failed items "
            "are outside it)",
            "tab:trojan-results",
            HEADER,
            results_rows(report),
        )
    }


def build_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Label counts per model (stacked), and the polluted-rate / anti-pollution-rate trade-off."""
    import plotly.graph_objects as go

    names = sorted(report["models"])
    models = report["models"]
    stacked = go.Figure()
    for label, colour in (
        ("recognized", "#2ca02c"),
        ("neutral", "#9e9e9e"),
        ("polluted", "#d62728"),
        ("flagged", "#ff7f0e"),
    ):
        stacked.add_bar(name=label, x=names, y=[models[n][label] for n in names], marker_color=colour)
    stacked.update_layout(title="Judge labels per model", barmode="stack")
    trade = go.Figure(
        go.Scatter(
            x=[models[n]["polluted_rate"] for n in names],
            y=[models[n]["antipollution_rate"] for n in names],
            text=names,
            mode="markers+text",
            textposition="top center",
        )
    )
    trade.update_layout(
        title="Contamination vs explicit recognition",
        xaxis={"title": "polluted_rate", "range": [0, 1], "tickformat": ".0%"},
        yaxis={"title": "antipollution_rate", "range": [0, 1], "tickformat": ".0%"},
    )
    return {"judge_labels": stacked, "polluted_vs_antipollution": trade}


write_report = ReportWriter(COLUMNS, metric_rows, latex_tables, build_figures).write
DESIGN = RunDesign(BENCHMARK, is_run_dir, read_run_data, trojan_report, write_report)
