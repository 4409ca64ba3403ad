"""``bench compare``: search mitigation, a with-tools run against a run without tools, and its terminal tables."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from bench_core.cli.common import ReportConsole, fail, table, write_folder
from bench_core.kernel.report_files import p_value, pct


def compare(
    with_dir: Path = typer.Argument(..., help="Run directory of the tool-harness run (bench run medmisbench --tools)."),
    without_dir: Path = typer.Argument(..., help="Run directory of the same model without tools (may be the same)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object."),
    out: Path | None = typer.Option(
        None, "--out", help="Where to write tables and figures (default WITH_DIR/compare)."
    ),
    with_label: str | None = typer.Option(None, "--with-label", help="Which with-tools run (label, model or config)."),
    without_label: str | None = typer.Option(None, "--without-label", help="Which run without tools."),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="Write Plotly figures (HTML; PNG with --png)."),
    png: bool = typer.Option(
        False, "--png/--no-png", help="Also render figures to PNG (needs Chromium; seconds per figure)."
    ),
) -> None:
    """Search mitigation: accuracy, ASR and TASR with vs without tools on the same items, tool use, flips."""
    from bench_core.mitigation.metrics import ComparisonError, compare_runs
    from bench_core.mitigation.report import write_comparison

    for directory in (with_dir, without_dir):
        if not directory.is_dir():
            fail(f"{directory}: no such directory")
    try:
        result = compare_runs(with_dir, without_dir, with_label=with_label, without_label=without_label)
    except ComparisonError as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    console = ReportConsole()  # tables that do not fit are stacked, user text printed as is
    print_comparison(result, console)
    target = out or with_dir / "compare"
    written = write_folder(target, lambda folder: write_comparison(result, folder, figures=figures, png=png))
    console.print(f"wrote {len(written)} files to {target}")


def print_comparison(comparison: dict[str, Any], console: Console) -> None:
    """Readable tables per model: accuracy, ASR/TASR (own and matched), tool use, flip cases."""
    from bench_core.mitigation.report import diff_cell, mean_cell, rate_cell

    console.rule(f"With vs without tools: {comparison['with_dir']} vs {comparison['without_dir']}")
    console.print(
        f"{comparison['n_items_common']} item(s) in both runs. Rates in %, differences (with - without) in "
        "percentage points with 95% CI: Newcombe paired for accuracy and matched ASR/TASR, Newcombe unpaired "
        "for each run's own ASR/TASR; p: McNemar exact.",
        highlight=False,
    )
    for name, model in comparison["models"].items():
        columns = ("condition", "n", "without", "with", "Δ (95% CI)", "fixed", "caused", "p")
        accuracy = table(f"{name}: accuracy on items answered in both runs", columns, no_wrap=True)
        for condition, block in model["conditions"].items():
            a = block["accuracy"]
            accuracy.add_row(
                condition,
                str(a["n"]),
                pct(a["without"]["rate"]),
                pct(a["with"]["rate"]),
                diff_cell(a["diff"], a["diff_ci"]),
                str(block["n_fixed"]),
                str(block["n_caused"]),
                p_value(a["mcnemar_p"]),
            )
        console.print(accuracy)
        columns = ("condition", "metric", "without", "with", "Δ (95% CI)", "matched n", "matched Δ (95% CI)",
                   "prevented", "caused", "p")  # fmt: skip
        title = f"{name}: attack success (own clean baseline; matched = clean-correct in both)"
        attack = table(title, columns, left=("condition", "metric"), no_wrap=True, title_justify="center")
        for condition, block in model["conditions"].items():
            for metric in ("asr", "tasr"):
                if metric not in block:
                    continue
                own, matched = block[metric], block[f"{metric}_matched"]
                attack.add_row(
                    condition,
                    metric.upper(),
                    rate_cell(own["without"]),
                    rate_cell(own["with"]),
                    diff_cell(own["diff"], own["diff_ci"]),
                    str(matched["n"]),
                    diff_cell(matched["diff"], matched["diff_ci"]),
                    str(matched["n_prevented"]),
                    str(matched["n_caused"]),
                    p_value(matched["mcnemar_p"]),
                )
        console.print(attack)
        columns = ("condition", "items", "tool calls/item", "searches/item", "pages/item", "cites visited",
                   "stop reasons", "tool errors", "failed")  # fmt: skip
        title = f"{name}: tool use (answered items of the with-tools run)"
        use = table(title, columns, left=("condition", "stop reasons", "tool errors"), title_justify="center")
        for condition, stats in model["tool_use"].items():
            use.add_row(
                condition,
                str(stats["n_items"]),
                f"{mean_cell(stats['tool_calls'])} (max {stats['tool_calls']['max'] or 0})",
                mean_cell(stats["searches"]),
                mean_cell(stats["pages"]),
                rate_cell(stats["answers_citing_visited_source"]),
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
