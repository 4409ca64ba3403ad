"""Presentation of a MedMisBench report object: terminal tables, CSV, LaTeX and Plotly figures.

Everything here reads the dict built by ``bench_core.medmisbench.metrics.medmisbench_report`` and
computes nothing new, so every output shows the same numbers as ``bench report --json``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench_core.kernel import latex
from bench_core.kernel.latex import escape as latex_escape  # noqa: F401  (public: report.latex_escape)
from bench_core.medmisbench import taxonomy

METRICS = (("accuracy", "n", None), ("asr", "n_clean_correct", "n_flipped"), ("tasr", "n_clean_correct", "n_targeted"))


def _pct(value: float | None, missing: str = "–") -> str:
    return missing if value is None else f"{100 * value:.1f}"


def _with_ci(block: dict[str, Any], rate: str) -> str:
    value = block.get(rate)
    ci = block.get(f"{rate}_ci")
    if value is None:
        return "–"
    return f"{_pct(value)} ({_pct(ci[0])}–{_pct(ci[1])})" if ci else _pct(value)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Readable tables: per model and condition, the mean across models, and Type 1 ASR by stratum."""
    console.rule(f"MedMisBench: {report.get('run_dir', '')}")
    console.print(
        f"{report['n_evaluable']} evaluable item(s) of {report['n_items']}; {len(report['skipped'])} skipped. "
        "Rates in %, Wilson 95% CI in brackets.",
        highlight=False,
    )
    for name, model in report["models"].items():
        table = Table(title=f"{name}: overall (pooled over subsets)", title_justify="left")
        for column in ("condition", "n", "accuracy", "ASR", "TASR", "ΔASR def.", "unparseable", "failed"):
            table.add_column(column, justify="left" if column == "condition" else "right", no_wrap=True)
        for condition, block in model["conditions"].items():
            table.add_row(
                condition,
                str(block["n"]),
                _with_ci(block, "accuracy"),
                _with_ci(block, "asr"),
                _with_ci(block, "tasr"),
                _pct(block.get("asr_delta")) if "asr_delta" in block else "",
                str(block["n_unparseable"]),
                str(block["n_failed"]),
            )
        console.print(table)
    if len(report["models"]) > 1:
        mean = Table(title="Mean across models")
        for column in ("condition", "accuracy", "ASR", "TASR"):
            mean.add_column(column)
        for condition, block in report["mean"]["conditions"].items():
            mean.add_row(condition, _pct(block.get("accuracy")), _pct(block.get("asr")), _pct(block.get("tasr")))
        console.print(mean)
    for stratum in ("subset", "provenance", "content"):
        strata = Table(title=f"Type 1 / Type 2 ASR by {stratum}")
        strata.add_column(stratum)
        for name in report["models"]:
            strata.add_column(f"{name} T1")
            strata.add_column(f"{name} T2")
        values = sorted({v for m in report["models"].values() for v in m["strata"][stratum]})
        for value in values:
            row = [value]
            for model in report["models"].values():
                blocks = model["strata"][stratum].get(value, {})
                row += [_with_ci(blocks.get("type1", {}), "asr"), _with_ci(blocks.get("type2", {}), "asr")]
            strata.add_row(*row)
        console.print(strata)
    if report["skipped"]:
        skipped = ", ".join(f"{s['item_id']} ({s['reason']})" for s in report["skipped"])
        console.print(f"Skipped: {skipped}", highlight=False)


# -- CSV ------------------------------------------------------------------------------------------

CSV_COLUMNS = ("model", "stratum", "value", "condition", "metric", "k", "n", "rate", "ci_low", "ci_high")


def metric_rows(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Long-format rows: one per model x stratum value x condition x metric ("Overall" = pooled)."""
    for name, model in report["models"].items():
        blocks = [("overall", "Overall", model["conditions"])]
        for stratum, values in model["strata"].items():
            blocks += [(stratum, value, conditions) for value, conditions in values.items()]
        for stratum, value, conditions in blocks:
            for condition, block in conditions.items():
                for metric, denominator, numerator in METRICS:
                    if metric not in block:
                        continue
                    ci = block.get(f"{metric}_ci") or [None, None]
                    k = block["n_correct"] if numerator is None else block[numerator]
                    yield {
                        "model": name,
                        "stratum": stratum,
                        "value": value,
                        "condition": condition,
                        "metric": metric,
                        "k": k,
                        "n": block[denominator],
                        "rate": block[metric],
                        "ci_low": ci[0],
                        "ci_high": ci[1],
                    }


def write_csv(report: dict[str, Any], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(metric_rows(report))


# -- LaTeX ----------------------------------------------------------------------------------------


def _latex_table(caption: str, label: str, header: list[str], rows: list[list[str]]) -> str:
    return latex.table(caption, label, header, rows, placement="t")


def latex_tables(report: dict[str, Any]) -> dict[str, str]:
    """booktabs tables: accuracy, Type 1 ASR/TASR, Type 2 ASR (subset columns + Overall), strata."""
    models = report["models"]
    subsets = sorted({v for m in models.values() for v in m["strata"]["subset"]})
    display = {s: (taxonomy.subset(s).display_name if taxonomy.subset(s) else s) for s in subsets}
    tables: dict[str, str] = {}

    def by_subset(condition: str, metric: str) -> list[list[str]]:
        rows = []
        for name, model in models.items():
            row = [name]
            for s in subsets:
                row.append(_pct(model["strata"]["subset"].get(s, {}).get(condition, {}).get(metric)))
            row.append(_pct(model["conditions"].get(condition, {}).get(metric)))
            rows.append(row)
        if len(models) > 1:
            mean = report["mean"]
            row = ["Mean"]
            for s in subsets:
                row.append(_pct(mean["strata"]["subset"].get(s, {}).get(condition, {}).get(metric)))
            row.append(_pct(mean["conditions"].get(condition, {}).get(metric)))
            rows.append(row)
        return rows

    header = ["Model", *[display[s] for s in subsets], "Overall"]
    for condition, metric, caption in (
        ("clean", "accuracy", "Clean accuracy (%)"),
        ("type1", "accuracy", "Type 1 accuracy (%)"),
        ("type2", "accuracy", "Type 2 accuracy (%)"),
        ("type1", "asr", "Type 1 attack success rate (%)"),
        ("type1", "tasr", "Type 1 targeted attack success rate (%)"),
        ("type2", "asr", "Type 2 attack success rate (%)"),
    ):
        if any(condition in m["conditions"] for m in models.values()):
            tables[f"{condition}_{metric}"] = _latex_table(
                caption + ". Overall pools counts over subsets; Mean averages models.",
                f"tab:medmisbench-{condition}-{metric}",
                header,
                by_subset(condition, metric),
            )
    for stratum in ("provenance", "content"):
        values = sorted({v for m in models.values() for v in m["strata"][stratum]})
        rows = []
        for value in values:
            name = _stratum_name(stratum, value)
            row = [name]
            for model in models.values():
                blocks = model["strata"][stratum].get(value, {})
                row += [_pct(blocks.get("type1", {}).get("asr")), _pct(blocks.get("type2", {}).get("asr"))]
            rows.append(row)
        header_s = [stratum.capitalize()] + [f"{n} {t}" for n in models for t in ("T1 ASR", "T2 ASR")]
        tables[f"asr_by_{stratum}"] = _latex_table(
            f"Type 1 and Type 2 ASR (%) by {stratum}", f"tab:medmisbench-asr-{stratum}", header_s, rows
        )
    return tables


def _stratum_name(stratum: str, value: str) -> str:
    try:
        if stratum == "content":
            return taxonomy.content_type(value).display_name
        if stratum == "provenance":
            return taxonomy.provenance(value).display_name
    except taxonomy.UnknownLabelError:
        pass
    return value


# -- figures --------------------------------------------------------------------------------------


def build_figures(report: dict[str, Any]) -> dict[str, Any]:
    """Plotly figures: accuracy by condition, Type 1 ASR heatmap content x provenance, per-model radar."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    models = report["models"]
    out: dict[str, Any] = {}

    accuracy = go.Figure()
    for name, model in models.items():
        conditions = list(model["conditions"])
        values = [model["conditions"][c]["accuracy"] for c in conditions]
        cis = [model["conditions"][c]["accuracy_ci"] for c in conditions]
        accuracy.add_bar(
            name=name,
            x=conditions,
            y=values,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [ci[1] - v if ci and v is not None else 0 for ci, v in zip(cis, values, strict=True)],
                "arrayminus": [v - ci[0] if ci and v is not None else 0 for ci, v in zip(cis, values, strict=True)],
            },
        )
    accuracy.update_layout(
        title="Accuracy by condition (Wilson 95% CI)", yaxis={"range": [0, 1], "tickformat": ".0%"}, barmode="group"
    )
    out["accuracy_by_condition"] = accuracy

    contents = [c.id for c in taxonomy.CONTENT_TYPES]
    provenances = [p.id for p in taxonomy.PROVENANCES]
    heat = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=list(models) or ["(no model)"])
    for index, model in enumerate(models.values(), start=1):
        cells = model["strata"]["content_x_provenance"]
        z = [[cells.get(f"{c} x {p}", {}).get("type1", {}).get("asr") for p in provenances] for c in contents]
        text = [
            [
                f"{_pct(cells.get(f'{c} x {p}', {}).get('type1', {}).get('asr'))}"
                f" (n={cells.get(f'{c} x {p}', {}).get('type1', {}).get('n_clean_correct', 0)})"
                for p in provenances
            ]
            for c in contents
        ]
        heat.add_trace(
            go.Heatmap(
                z=z,
                x=[taxonomy.provenance(p).display_name.split(" (")[0] for p in provenances],
                y=[taxonomy.content_type(c).display_name for c in contents],
                text=text,
                texttemplate="%{text}",
                zmin=0,
                zmax=1,
                colorscale="Reds",
                showscale=index == 1,
            ),
            row=1,
            col=index,
        )
    heat.update_layout(title="Type 1 ASR by content type x provenance")
    out["asr_heatmap_content_x_provenance"] = heat

    radar = go.Figure()
    axes = ["clean accuracy", "Type 1 ASR", "Type 1 TASR", "Type 2 ASR"]
    for name, model in models.items():
        c = model["conditions"]
        values = [
            c.get("clean", {}).get("accuracy"),
            c.get("type1", {}).get("asr"),
            c.get("type1", {}).get("tasr"),
            c.get("type2", {}).get("asr"),
        ]
        radar.add_trace(
            go.Scatterpolar(r=[v or 0 for v in values] + [values[0] or 0], theta=[*axes, axes[0]], name=name)
        )
    radar.update_layout(
        title="Clean accuracy vs resilience loss", polar={"radialaxis": {"range": [0, 1], "tickformat": ".0%"}}
    )
    out["radar_clean_vs_asr_tasr"] = radar
    return out


def chromium_path() -> str | None:
    """The Chromium that kaleido renders PNG figures with (BROWSER_PATH, Debian's, or on PATH), if any."""
    for candidate in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def write_report(report: dict[str, Any], out_dir: Path, *, figures: bool = True, png: bool = True) -> list[Path]:
    """Write report.json, metrics.csv, LaTeX tables and figures (HTML, PNG) under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    path = out_dir / "report.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    written.append(path)
    path = out_dir / "metrics.csv"
    write_csv(report, path)
    written.append(path)
    written += write_tables(out_dir, latex_tables(report))
    if figures:
        written += write_figures(out_dir, build_figures(report), png=png)
    return written


def write_tables(out_dir: Path, tables: dict[str, str]) -> list[Path]:
    """One ``<name>.tex`` file per LaTeX table."""
    written = []
    for name, text in tables.items():
        path = out_dir / f"{name}.tex"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_figures(out_dir: Path, figures: dict[str, Any], *, png: bool = True) -> list[Path]:
    """Each Plotly figure as self-contained HTML and, when a Chromium is available for kaleido, PNG."""
    browser = chromium_path() if png else None
    if browser and "BROWSER_PATH" not in os.environ:
        os.environ["BROWSER_PATH"] = browser
    written = []
    for name, figure in figures.items():
        path = out_dir / f"{name}.html"
        figure.write_html(path, include_plotlyjs="cdn")
        written.append(path)
        if browser:
            path = out_dir / f"{name}.png"
            figure.write_image(path, width=1100, height=600)
            written.append(path)
    return written
