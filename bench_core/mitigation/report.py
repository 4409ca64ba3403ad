"""The files of a with-tools vs without-tools comparison: JSON, CSV, LaTeX, Plotly (terminal tables: ``cli``).

Everything here reads the object built by ``bench_core.mitigation.metrics.compare_runs`` and
computes nothing new, so every output shows the numbers of ``bench compare --json``.
Rates are shown in %, differences (with - without) in percentage points.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_core.kernel import latex
from bench_core.kernel.report_files import error_bars, p_value, pct, write_report_files

FLIP_COLUMNS = (
    "model", "item_key", "subset", "condition", "kind", "gold", "type1_target", "answer_without", "answer_with",
    "clean_correct_without", "clean_correct_with", "flip_prevented", "flip_caused", "stop_reason", "n_tool_calls",
    "queries", "visited", "cited_visited",
)  # fmt: skip
METRIC_COLUMNS = ("model", "condition", "metric", "scope", "k_without", "n_without", "k_with", "n_with",
                  "rate_without", "rate_with", "diff", "diff_ci_low", "diff_ci_high", "p_value")  # fmt: skip


def rate_cell(block: dict[str, Any]) -> str:
    """``"38.2 (34/89)"``: a rate in % with its counts."""
    return f"{pct(block['rate'])} ({block['k']}/{block['n']})"


def diff_cell(value: float | None, ci: list[float] | None) -> str:
    """A difference in percentage points with its CI: ``"+4.5 (+1.0 to +8.0)"``."""
    if value is None:
        return "–"
    text = pct(value, signed=True)
    return f"{text} ({pct(ci[0], signed=True)} to {pct(ci[1], signed=True)})" if ci else text


def mean_cell(stats: dict[str, Any]) -> str:
    return "–" if stats["mean"] is None else f"{stats['mean']:.2f}"


# -- CSV ------------------------------------------------------------------------------------------


def metric_rows(comparison: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Long rows: one per model x condition x metric x scope (paired / own / matched)."""
    for name, model in comparison["models"].items():
        for condition, block in model["conditions"].items():
            entries = [("accuracy", "paired", block["accuracy"])]
            for metric in ("asr", "tasr"):
                if metric in block:
                    entries += [(metric, "own", block[metric]), (metric, "matched", block[f"{metric}_matched"])]
            for metric, scope, data in entries:
                ci = data.get("diff_ci") or [None, None]
                yield {
                    "model": name,
                    "condition": condition,
                    "metric": metric,
                    "scope": scope,
                    "k_without": data["without"]["k"],
                    "n_without": data["without"]["n"],
                    "k_with": data["with"]["k"],
                    "n_with": data["with"]["n"],
                    "rate_without": data["without"]["rate"],
                    "rate_with": data["with"]["rate"],
                    "diff": data["diff"],
                    "diff_ci_low": ci[0],
                    "diff_ci_high": ci[1],
                    "p_value": data.get("mcnemar_p"),
                }


# -- LaTeX ----------------------------------------------------------------------------------------


def latex_tables(comparison: dict[str, Any]) -> dict[str, str]:
    """booktabs tables: accuracy with/without, ASR/TASR with/without, tool use, flip counts."""
    models = comparison["models"]
    accuracy, attack, use, flips = [], [], [], []
    for name, model in models.items():
        for condition, block in model["conditions"].items():
            a = block["accuracy"]
            accuracy.append(
                [name, condition, str(a["n"]), pct(a["without"]["rate"]), pct(a["with"]["rate"]),
                 diff_cell(a["diff"], a["diff_ci"]), p_value(a["mcnemar_p"])]
            )  # fmt: skip
            row = [name, condition, str(block["n_fixed"]), str(block["n_caused"])]
            for metric in ("asr", "tasr"):
                if metric not in block:
                    continue
                own, matched = block[metric], block[f"{metric}_matched"]
                matched_text = diff_cell(matched["diff"], matched["diff_ci"]) + f" [n={matched['n']}]"
                attack.append(
                    [name, condition, metric.upper(), rate_cell(own["without"]), rate_cell(own["with"]),
                     diff_cell(own["diff"], own["diff_ci"]), matched_text]
                )  # fmt: skip
            matched = block.get("asr_matched")
            row += [str(matched["n_prevented"]), str(matched["n_caused"])] if matched else ["–", "–"]
            flips.append(row)
        for condition, stats in model["tool_use"].items():
            use.append(
                [name, condition, str(stats["n_items"]), mean_cell(stats["tool_calls"]), mean_cell(stats["searches"]),
                 mean_cell(stats["pages"]), rate_cell(stats["answers_citing_visited_source"]),
                 str(sum(stats["failed_items"].values()))]
            )  # fmt: skip
    tables = {
        "mitigation_accuracy": latex.table(
            "Accuracy (%) without and with search tools on the items answered in both runs; difference in "
            "percentage points (Newcombe paired 95% CI) and McNemar exact p.",
            "tab:mitigation-accuracy",
            ["Model", "Condition", "n", "Without", "With", "Difference (95% CI)", "p"],
            accuracy,
            align="llrrrrr",
        ),
        "mitigation_tool_use": latex.table(
            "Tool use per item in the search harness: mean tool calls, searches and pages read; answers citing a "
            "visited source (%, k/n); failed items.",
            "tab:mitigation-tool-use",
            ["Model", "Condition", "Items", "Tool calls", "Searches", "Pages", "Cites visited", "Failed"],
            use,
            align="llrrrrrr",
        ),
        "mitigation_flips": latex.table(
            "Items whose correctness changed with search: fixed (wrong without, right with) and caused (right "
            "without, wrong with); injection flips prevented and caused among items correct without context in "
            "both runs.",
            "tab:mitigation-flips",
            ["Model", "Condition", "Fixed", "Caused", "Flips prevented", "Flips caused"],
            flips,
            align="llrrrr",
        ),
    }
    if attack:
        tables["mitigation_attack"] = latex.table(
            "Attack success without and with search tools (%, k/n over each run's own correct clean answers); "
            "difference in percentage points (Newcombe unpaired 95% CI) and matched difference over items correct "
            "without context in both runs (Newcombe paired 95% CI).",
            "tab:mitigation-attack",
            ["Model", "Condition", "Metric", "Without", "With", "Difference (95% CI)", "Matched difference"],
            attack,
            align="lllrrrr",
        )
    return tables


# -- figures --------------------------------------------------------------------------------------


def build_figures(comparison: dict[str, Any]) -> dict[str, Any]:
    """Plotly figures: rates without vs with tools (Wilson CIs), flip counts, tool calls per item."""
    import plotly.graph_objects as go

    out: dict[str, Any] = {}
    rates = go.Figure()
    for name, model in comparison["models"].items():
        for side in ("without", "with"):
            x, y, cis = [], [], []
            for condition, block in model["conditions"].items():
                x.append(f"{condition} accuracy")
                y.append(block["accuracy"][side]["rate"])
                cis.append(block["accuracy"][side]["ci"])
                for metric in ("asr", "tasr"):
                    if metric in block:
                        x.append(f"{condition} {metric.upper()}")
                        y.append(block[metric][side]["rate"])
                        cis.append(block[metric][side]["ci"])
            rates.add_bar(name=f"{name} {side} tools", x=x, y=y, error_y=error_bars(y, cis))
    rates.update_layout(
        title="Without vs with search tools (Wilson 95% CI)",
        barmode="group",
        yaxis={"range": [0, 1], "tickformat": ".0%"},
    )
    out["rates_with_vs_without_tools"] = rates

    flips = go.Figure()
    for name, model in comparison["models"].items():
        conditions = list(model["conditions"])
        flips.add_bar(name=f"{name} fixed", x=conditions, y=[model["conditions"][c]["n_fixed"] for c in conditions])
        flips.add_bar(name=f"{name} caused", x=conditions, y=[-model["conditions"][c]["n_caused"] for c in conditions])
    flips.update_layout(title="Items search fixed (up) or broke (down)", barmode="relative", yaxis={"title": "items"})
    out["flips_by_condition"] = flips

    calls = go.Figure()
    for name, model in comparison["models"].items():
        calls.add_bar(
            name=name,
            x=[c for c in model["tool_use"] if c != "all"],
            y=[model["tool_use"][c]["tool_calls"]["mean"] for c in model["tool_use"] if c != "all"],
        )
    calls.update_layout(title="Mean tool calls per item", barmode="group", yaxis={"title": "tool calls"})
    out["tool_calls_per_item"] = calls
    return out


def write_comparison(
    comparison: dict[str, Any], out_dir: Path, *, figures: bool = True, png: bool = True
) -> list[Path]:
    """comparison.json, comparison.csv, flips.csv, LaTeX tables and figures (HTML, PNG) under ``out_dir``."""
    flips = [{"model": n, **c} for n, m in comparison["models"].items() for c in m["flips"]]
    return write_report_files(
        comparison,
        out_dir,
        json_name="comparison.json",
        csv_files={"comparison.csv": (METRIC_COLUMNS, metric_rows(comparison)), "flips.csv": (FLIP_COLUMNS, flips)},
        tables=latex_tables(comparison),
        figures=build_figures if figures else None,
        png=png,
    )
