"""The files of a MedMisBench report: CSV, LaTeX tables and Plotly figures (terminal tables: ``cli/medmisbench``).

Everything here reads the dict built by ``bench_core.medmisbench.metrics.medmisbench_report`` and
computes nothing new, so every output shows the same numbers as ``bench report --json``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_core.kernel.latex import escape as latex_escape  # noqa: F401  (public: report.latex_escape)
from bench_core.kernel.report_files import ReportWriter, error_bars, latex_table, pct
from bench_core.kernel.rundir import RunDesign
from bench_core.medmisbench import taxonomy
from bench_core.medmisbench.metrics import combine_reports, medmisbench_report
from bench_core.medmisbench.run import BENCHMARK, is_run_dir, read_run_data

METRICS = (("accuracy", "n", None), ("asr", "n_clean_correct", "n_flipped"), ("tasr", "n_clean_correct", "n_targeted"))


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


# -- the paper's main tables ------------------------------------------------------------------------

# (condition, metric, title): the paper's Tables 12-14 (and Figure 4) by subset, Overall and Mean.
MAIN_TABLES = (
    ("clean", "accuracy", "Clean accuracy"),
    ("type1", "accuracy", "Type 1 accuracy"),
    ("type2", "accuracy", "Type 2 accuracy"),
    ("type1", "asr", "Type 1 attack success rate (ASR)"),
    ("type1", "tasr", "Type 1 targeted attack success rate (TASR)"),
    ("type2", "asr", "Type 2 attack success rate (ASR)"),
)


def subset_order(report: dict[str, Any]) -> list[str]:
    """The report's subsets in the paper's order (MedMisQA, MedMisMCQA, MedMisXpertQA, MedMisJourney,
    MedMisHLE), then custom subsets by name."""
    found = {v for m in report["models"].values() for v in m["strata"]["subset"]}
    known = [s for s in taxonomy.SUBSET_IDS if s in found]
    return known + sorted(found - set(known))


def main_tables(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per metric of ``MAIN_TABLES`` present: a row per model (and a Mean row with several models),
    a column per subset and Overall (pooled counts). Rates as fractions, None where undefined."""
    models = report["models"]
    subsets = subset_order(report)
    header = ["Model", *[(taxonomy.subset(s).display_name if taxonomy.subset(s) else s) for s in subsets], "Overall"]
    out: dict[str, dict[str, Any]] = {}
    for condition, metric, title in MAIN_TABLES:
        if not any(condition in m["conditions"] for m in models.values()):
            continue
        rows: list[list[Any]] = []
        blocks = [(name, model) for name, model in models.items()]
        if len(models) > 1:
            blocks.append(("Mean", report["mean"]))
        for name, model in blocks:
            row: list[Any] = [name]
            for s in subsets:
                row.append(model["strata"]["subset"].get(s, {}).get(condition, {}).get(metric))
            row.append(model["conditions"].get(condition, {}).get(metric))
            rows.append(row)
        out[f"{condition}_{metric}"] = {"title": title, "header": header, "rows": rows}
    return out


# -- LaTeX ----------------------------------------------------------------------------------------


def latex_tables(report: dict[str, Any]) -> dict[str, str]:
    """booktabs tables: accuracy, Type 1 ASR/TASR, Type 2 ASR (subset columns + Overall, Mean row), strata."""
    models = report["models"]
    tables: dict[str, str] = {}
    for key, table in main_tables(report).items():
        condition, metric = key.split("_", 1)
        tables[key] = latex_table(
            f"{table['title']} (%). Overall pools counts over subsets; Mean averages models.",
            f"tab:medmisbench-{condition}-{metric}",
            table["header"],
            [[row[0], *(pct(v) for v in row[1:])] for row in table["rows"]],
        )
    for stratum in ("provenance", "content"):
        values = sorted({v for m in models.values() for v in m["strata"][stratum]})
        rows = []
        for value in values:
            name = _stratum_name(stratum, value)
            row = [name]
            for model in models.values():
                blocks = model["strata"][stratum].get(value, {})
                row += [pct(blocks.get("type1", {}).get("asr")), pct(blocks.get("type2", {}).get("asr"))]
            rows.append(row)
        header_s = [stratum.capitalize()] + [f"{n} {t}" for n in models for t in ("T1 ASR", "T2 ASR")]
        tables[f"asr_by_{stratum}"] = latex_table(
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
            error_y=error_bars(values, cis),
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
                f"{pct(cells.get(f'{c} x {p}', {}).get('type1', {}).get('asr'))}"
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


write_report = ReportWriter(CSV_COLUMNS, metric_rows, latex_tables, build_figures).write
DESIGN = RunDesign(BENCHMARK, is_run_dir, read_run_data, medmisbench_report, write_report)


def combined_report(run_dirs: list[Path]) -> dict[str, Any]:
    """The report over several MedMisBench run directories (``metrics.combine_reports``)."""
    return combine_reports([(run_dir.name, DESIGN.build(run_dir)) for run_dir in run_dirs])
