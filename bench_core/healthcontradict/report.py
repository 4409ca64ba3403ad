"""Presentation of a HealthContradict report: terminal tables, CSV, LaTeX (paper Table 5 style), Plotly figures.

Reads the dict of ``bench_core.healthcontradict.metrics.healthcontradict_report`` and computes
nothing new, so every output shows the numbers of ``bench report --json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench_core.kernel.report_files import latex_table, pct, write_report_files

CSV_COLUMNS = ("model", "section", "name", "metric", "value", "k", "n", "ci_low", "ci_high")


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _num(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ci(block: dict[str, Any], rate: str) -> str:
    value, ci = block.get(rate), block.get(f"{rate}_ci")
    if value is None:
        return "–"
    return f"{pct(value)} ({pct(ci[0])}–{pct(ci[1])})" if ci else pct(value)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Per model: accuracy and macro-F1 by template, OR/VM, McNemar and agreement by template pair."""
    console.rule(f"HealthContradict: {report.get('run_dir', '')}")
    console.print(
        f"{report['n_instances']} instance(s) over {report['n_topics']} question(s). "
        "Rates in %, Wilson 95% CI in brackets; NC is asked once per question.",
        highlight=False,
    )
    for name, model in report["models"].items():
        table = Table(title=f"{name}", title_justify="left")
        for column in ("template", "n", "accuracy", "macro-F1", "unparseable", "failed", "truncated"):
            table.add_column(column, justify="left" if column == "template" else "right", no_wrap=True)
        for template, block in model["templates"].items():
            table.add_row(
                template,
                str(block["n"]),
                _ci(block, "accuracy"),
                pct(block["macro_f1"]),
                str(block["n_unparseable"]),
                str(block["n_failed"]),
                str(block["n_truncated"]),
            )
        console.print(table)
        console.print(
            f"OR = P(wrong under CC | wrong under NC): {_ci(model, 'or_rate')} [{model['or_k']}/{model['or_n']}]   "
            f"VM = P(wrong under IC | right under NC): {_ci(model, 'vm_rate')} [{model['vm_k']}/{model['vm_n']}]",
            highlight=False,
        )
        pairs = Table(title=f"{name}: template pairs", title_justify="left")
        for column in ("pair", "b", "c", "McNemar χ²", "p", "agreement"):
            pairs.add_column(column, justify="left" if column == "pair" else "right")
        for pair, test in model["mcnemar"].items():
            pairs.add_row(
                pair,
                str(test["b"]),
                str(test["c"]),
                _num(test["chi2"]),
                _p(test["p_value"]),
                pct(model["agreement"][pair]["rate"]),
            )
        console.print(pairs)


def metric_rows(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Long-format rows: templates, failure modes, McNemar, agreement, context quartiles."""
    for name, model in report["models"].items():
        for template, block in model["templates"].items():
            ci = block.get("accuracy_ci") or [None, None]
            yield {
                "model": name,
                "section": "template",
                "name": template,
                "metric": "accuracy",
                "value": block["accuracy"],
                "k": block["n_correct"],
                "n": block["n"],
                "ci_low": ci[0],
                "ci_high": ci[1],
            }
            yield {
                "model": name,
                "section": "template",
                "name": template,
                "metric": "macro_f1",
                "value": block["macro_f1"],
                "n": block["n"],
            }
        for rate, key in (("or_rate", "or"), ("vm_rate", "vm")):
            ci = model.get(f"{key}_ci") or [None, None]
            yield {
                "model": name,
                "section": "failure_mode",
                "name": key.upper(),
                "metric": "rate",
                "value": model[rate],
                "k": model[f"{key}_k"],
                "n": model[f"{key}_n"],
                "ci_low": ci[0],
                "ci_high": ci[1],
            }
        for pair, test in model["mcnemar"].items():
            yield {
                "model": name,
                "section": "mcnemar",
                "name": pair,
                "metric": "chi2",
                "value": test["chi2"],
                "n": test["n"],
            }
            yield {
                "model": name,
                "section": "mcnemar",
                "name": pair,
                "metric": "p_value",
                "value": test["p_value"],
                "n": test["n"],
            }
        for pair, block in model["agreement"].items():
            yield {
                "model": name,
                "section": "agreement",
                "name": pair,
                "metric": "rate",
                "value": block["rate"],
                "k": block["k"],
                "n": block["n"],
            }
        for template, groups in model["by_context_quartile"].items():
            for group in groups:
                yield {
                    "model": name,
                    "section": "context_quartile",
                    "name": f"{template} Q{group['quartile']}",
                    "metric": "accuracy",
                    "value": group["accuracy"],
                    "n": group["n"],
                }


def latex_tables(report: dict[str, Any]) -> dict[str, str]:
    """Accuracy and macro-F1 by template (paper Table 5), OR/VM, and McNemar p-values."""
    models = report["models"]
    templates = report["templates"]
    tables: dict[str, str] = {}
    header = ["Model"] + [f"{t} {m}" for t in templates for m in ("Acc.", "F1")]
    rows = []
    for name, model in models.items():
        row = [name]
        for template in templates:
            block = model["templates"].get(template, {})
            row += [pct(block.get("accuracy")), pct(block.get("macro_f1"))]
        rows.append(row)
    tables["accuracy_macro_f1"] = latex_table(
        "Accuracy and macro F1 (%) by prompt template on HealthContradict", "tab:hc-accuracy", header, rows
    )
    rows = [
        [name, pct(m["or_rate"]), f"{m['or_k']}/{m['or_n']}", pct(m["vm_rate"]), f"{m['vm_k']}/{m['vm_n']}"]
        for name, m in models.items()
    ]
    tables["failure_modes"] = latex_table(
        "Failure rates (%): over-reliance on parametric knowledge (OR) and vulnerability to misleading context (VM)",
        "tab:hc-failure-modes",
        ["Model", "OR", "k/n", "VM", "k/n"],
        rows,
    )
    pairs = sorted({pair for m in models.values() for pair in m["mcnemar"]}, key=_pair_order(templates))
    rows = [[pair] + [_p(m["mcnemar"].get(pair, {}).get("p_value")) for m in models.values()] for pair in pairs]
    tables["mcnemar"] = latex_table(
        "McNemar tests between templates (continuity-corrected chi-square, two-sided p)",
        "tab:hc-mcnemar",
        ["Templates", *models],
        rows,
    )
    return tables


def _pair_order(templates: list[str]):
    def key(pair: str) -> tuple[int, int]:
        first, second = pair.split("-")
        return (
            templates.index(first) if first in templates else 99,
            templates.index(second) if second in templates else 99,
        )

    return key


def build_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Accuracy/macro-F1 by template, p-hat densities, agreement heatmaps, accuracy by context quartile."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    models = report["models"]
    templates = report["templates"]
    out: dict[str, Any] = {}

    bars = make_subplots(rows=1, cols=2, subplot_titles=["Accuracy", "Macro F1"])
    for name, model in models.items():
        for column, metric in ((1, "accuracy"), (2, "macro_f1")):
            bars.add_bar(
                name=name,
                x=templates,
                y=[model["templates"].get(t, {}).get(metric) for t in templates],
                showlegend=column == 1,
                legendgroup=name,
                row=1,
                col=column,
            )
    bars.update_layout(title="HealthContradict by prompt template", barmode="group")
    bars.update_yaxes(range=[0, 1], tickformat=".0%")
    out["accuracy_macro_f1_by_template"] = bars

    densities = make_subplots(
        rows=1, cols=max(1, len(templates)), subplot_titles=templates or ["(none)"], shared_yaxes=True
    )
    for name, model in models.items():
        for column, template in enumerate(templates, start=1):
            block = model["density"].get(template)
            if not block or not block["n"]:
                continue
            edges = block["bin_edges"]
            centres = [(a + b) / 2 for a, b in pairwise(edges)]
            densities.add_trace(
                go.Scatter(
                    x=centres,
                    y=block["density"],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=column == 1,
                ),
                row=1,
                col=column,
            )
    densities.update_layout(title="Density of the predicted label's probability")
    densities.update_xaxes(range=[0.5, 1.0])
    out["probability_density"] = densities

    heat = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=list(models) or ["(no model)"])
    for index, model in enumerate(models.values(), start=1):
        z = [
            [
                1.0
                if a == b
                else model["agreement"].get(f"{a}-{b}", model["agreement"].get(f"{b}-{a}", {})).get("rate")
                for b in templates
            ]
            for a in templates
        ]
        heat.add_trace(
            go.Heatmap(
                z=z,
                x=templates,
                y=templates,
                zmin=0,
                zmax=1,
                colorscale="Blues",
                text=[[pct(v) for v in row] for row in z],
                texttemplate="%{text}",
                showscale=index == 1,
            ),
            row=1,
            col=index,
        )
    heat.update_layout(title="Prediction agreement between templates")
    out["agreement_heatmap"] = heat

    lines = go.Figure()
    for name, model in models.items():
        for template, groups in model["by_context_quartile"].items():
            lines.add_trace(
                go.Scatter(
                    x=[f"Q{g['quartile']}" for g in groups],
                    y=[g["accuracy"] for g in groups],
                    mode="lines+markers",
                    name=f"{name} {template}",
                )
            )
    lines.update_layout(
        title="Accuracy by context-length quartile (words of the documents shown)",
        yaxis={"range": [0, 1], "tickformat": ".0%"},
    )
    out["accuracy_by_context_quartile"] = lines
    return out


def write_report(report: dict[str, Any], out_dir: Path, *, figures: bool = True, png: bool = True) -> list[Path]:
    """report.json, metrics.csv, LaTeX tables and figures under ``out_dir``."""
    return write_report_files(
        report,
        out_dir,
        csv_columns=CSV_COLUMNS,
        csv_rows=metric_rows(report),
        tables=latex_tables(report),
        figures=build_figures if figures else None,
        png=png,
    )
