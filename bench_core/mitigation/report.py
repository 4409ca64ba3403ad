"""Presentation of a with-tools vs without-tools comparison: terminal tables, JSON, CSV, LaTeX, Plotly.

Everything here reads the object built by ``bench_core.mitigation.metrics.compare_runs`` and
computes nothing new, so every output shows the numbers of ``bench compare --json``.
Rates are shown in %, differences (with - without) in percentage points.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench_core.kernel import latex
from bench_core.medmisbench.report import write_figures, write_tables

FLIP_COLUMNS = (
    "model", "item_key", "subset", "condition", "kind", "gold", "type1_target", "answer_without", "answer_with",
    "clean_correct_without", "clean_correct_with", "flip_prevented", "flip_caused", "stop_reason", "n_tool_calls",
    "queries", "visited", "cited_visited",
)  # fmt: skip
METRIC_COLUMNS = ("model", "condition", "metric", "scope", "k_without", "n_without", "k_with", "n_with",
                  "rate_without", "rate_with", "diff", "diff_ci_low", "diff_ci_high", "p_value")  # fmt: skip


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _rate(block: dict[str, Any]) -> str:
    return f"{_pct(block['rate'])} ({block['k']}/{block['n']})"


def _diff(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "–"
    text = f"{100 * value:+.1f}"
    return f"{text} ({100 * ci[0]:+.1f} to {100 * ci[1]:+.1f})" if ci else text


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _mean(stats: dict[str, Any]) -> str:
    return "–" if stats["mean"] is None else f"{stats['mean']:.2f}"


# -- terminal -------------------------------------------------------------------------------------


def print_comparison(comparison: dict[str, Any], console: Console) -> None:
    """Readable tables per model: accuracy, ASR/TASR (own and matched), tool use, flip cases."""
    console.rule(f"With vs without tools: {comparison['with_dir']} vs {comparison['without_dir']}")
    console.print(
        f"{comparison['n_items_common']} item(s) in both runs. Rates in %, differences (with - without) in "
        "percentage points with 95% CI: Newcombe paired for accuracy and matched ASR/TASR, Newcombe unpaired "
        "for each run's own ASR/TASR; p: McNemar exact.",
        highlight=False,
    )
    for name, model in comparison["models"].items():
        accuracy = Table(title=f"{name}: accuracy on items answered in both runs", title_justify="left")
        for column in ("condition", "n", "without", "with", "Δ (95% CI)", "fixed", "caused", "p"):
            accuracy.add_column(column, justify="left" if column == "condition" else "right", no_wrap=True)
        for condition, block in model["conditions"].items():
            a = block["accuracy"]
            accuracy.add_row(
                condition,
                str(a["n"]),
                _pct(a["without"]["rate"]),
                _pct(a["with"]["rate"]),
                _diff(a["diff"], a["diff_ci"]),
                str(block["n_fixed"]),
                str(block["n_caused"]),
                _p(a["mcnemar_p"]),
            )
        console.print(accuracy)
        attack = Table(title=f"{name}: attack success (own clean baseline; matched = clean-correct in both)")
        for column in ("condition", "metric", "without", "with", "Δ (95% CI)", "matched n", "matched Δ (95% CI)",
                       "prevented", "caused", "p"):  # fmt: skip
            attack.add_column(column, justify="left" if column in ("condition", "metric") else "right", no_wrap=True)
        for condition, block in model["conditions"].items():
            for metric in ("asr", "tasr"):
                if metric not in block:
                    continue
                own, matched = block[metric], block[f"{metric}_matched"]
                attack.add_row(
                    condition,
                    metric.upper(),
                    _rate(own["without"]),
                    _rate(own["with"]),
                    _diff(own["diff"], own["diff_ci"]),
                    str(matched["n"]),
                    _diff(matched["diff"], matched["diff_ci"]),
                    str(matched["n_prevented"]),
                    str(matched["n_caused"]),
                    _p(matched["mcnemar_p"]),
                )
        console.print(attack)
        use = Table(title=f"{name}: tool use (answered items of the with-tools run)")
        for column in ("condition", "items", "tool calls/item", "searches/item", "pages/item", "cites visited",
                       "stop reasons", "tool errors", "failed"):  # fmt: skip
            use.add_column(
                column, justify="left" if column in ("condition", "stop reasons", "tool errors") else "right"
            )
        for condition, stats in model["tool_use"].items():
            use.add_row(
                condition,
                str(stats["n_items"]),
                f"{_mean(stats['tool_calls'])} (max {stats['tool_calls']['max'] or 0})",
                _mean(stats["searches"]),
                _mean(stats["pages"]),
                _rate(stats["answers_citing_visited_source"]),
                ", ".join(f"{k}: {v}" for k, v in stats["stop_reasons"].items()) or "–",
                ", ".join(f"{k}: {v}" for k, v in stats["tool_errors"].items()) or "–",
                ", ".join(f"{k}: {v}" for k, v in stats["failed_items"].items()) or "0",
            )
        console.print(use)
        if model["flips"]:
            flips = Table(title=f"{name}: items where search changed correctness")
            for column in ("item", "condition", "search", "gold", "without", "with", "ASR flip", "visited", "cited"):
                flips.add_column(column)
            for case in model["flips"]:
                flips.add_row(
                    case["item_key"],
                    case["condition"],
                    case["kind"],
                    case["gold"],
                    str(case["answer_without"]),
                    str(case["answer_with"]),
                    "prevented" if case["flip_prevented"] else "caused" if case["flip_caused"] else "",
                    ", ".join(case["visited"]) or "–",
                    "yes" if case["cited_visited"] else "no",
                )
            console.print(flips)


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


def _write_csv(path: Path, columns: tuple[str, ...], rows: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "; ".join(v) if isinstance(v, list) else v for k, v in row.items()})


# -- LaTeX ----------------------------------------------------------------------------------------


def latex_tables(comparison: dict[str, Any]) -> dict[str, str]:
    """booktabs tables: accuracy with/without, ASR/TASR with/without, tool use, flip counts."""
    models = comparison["models"]
    accuracy, attack, use, flips = [], [], [], []
    for name, model in models.items():
        for condition, block in model["conditions"].items():
            a = block["accuracy"]
            accuracy.append(
                [name, condition, str(a["n"]), _pct(a["without"]["rate"]), _pct(a["with"]["rate"]),
                 _diff(a["diff"], a["diff_ci"]), _p(a["mcnemar_p"])]
            )  # fmt: skip
            row = [name, condition, str(block["n_fixed"]), str(block["n_caused"])]
            for metric in ("asr", "tasr"):
                if metric not in block:
                    continue
                own, matched = block[metric], block[f"{metric}_matched"]
                matched_text = _diff(matched["diff"], matched["diff_ci"]) + f" [n={matched['n']}]"
                attack.append(
                    [name, condition, metric.upper(), _rate(own["without"]), _rate(own["with"]),
                     _diff(own["diff"], own["diff_ci"]), matched_text]
                )  # fmt: skip
            matched = block.get("asr_matched")
            row += [str(matched["n_prevented"]), str(matched["n_caused"])] if matched else ["–", "–"]
            flips.append(row)
        for condition, stats in model["tool_use"].items():
            use.append(
                [name, condition, str(stats["n_items"]), _mean(stats["tool_calls"]), _mean(stats["searches"]),
                 _mean(stats["pages"]), _rate(stats["answers_citing_visited_source"]),
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


def _error_bars(values: list[float | None], cis: list[list[float] | None]) -> dict[str, Any]:
    pairs = list(zip(values, cis, strict=True))
    return {
        "type": "data",
        "symmetric": False,
        "array": [ci[1] - v if ci and v is not None else 0 for v, ci in pairs],
        "arrayminus": [v - ci[0] if ci and v is not None else 0 for v, ci in pairs],
    }


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
            rates.add_bar(name=f"{name} {side} tools", x=x, y=y, error_y=_error_bars(y, cis))
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
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    path = out_dir / "comparison.json"
    path.write_text(json.dumps(comparison, indent=2, ensure_ascii=False), encoding="utf-8")
    written.append(path)
    path = out_dir / "comparison.csv"
    _write_csv(path, METRIC_COLUMNS, metric_rows(comparison))
    written.append(path)
    path = out_dir / "flips.csv"
    _write_csv(path, FLIP_COLUMNS, [{"model": n, **c} for n, m in comparison["models"].items() for c in m["flips"]])
    written.append(path)
    written += write_tables(out_dir, latex_tables(comparison))
    if figures:
        written += write_figures(out_dir, build_figures(comparison), png=png)
    return written
