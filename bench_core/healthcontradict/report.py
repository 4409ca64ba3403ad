"""The files of a HealthContradict report: CSV, LaTeX (paper Table 5 style), Plotly figures (terminal: ``cli``).

Reads the dict of ``bench_core.healthcontradict.metrics.healthcontradict_report`` and computes
nothing new, so every output shows the numbers of ``bench report --json``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench_core.healthcontradict.items import HCInstance
from bench_core.healthcontradict.metrics import healthcontradict_report
from bench_core.healthcontradict.run import BENCHMARK, HCRunData, RunDirError, is_run_dir, read_run_data
from bench_core.kernel.report_files import ReportWriter, latex_table, p_value, pct
from bench_core.kernel.rundir import RunDesign

CSV_COLUMNS = ("model", "section", "name", "metric", "value", "k", "n", "ci_low", "ci_high")


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
                for metric in ("accuracy", "macro_f1"):
                    yield {
                        "model": name,
                        "section": "context_quartile",
                        "name": f"{template} Q{group['quartile']}",
                        "metric": metric,
                        "value": group[metric],
                        "n": group["n"],
                    }
    for template, tests in report.get("model_mcnemar", {}).items():
        for pair, test in tests.items():
            for metric in ("chi2", "p_value"):
                yield {
                    "model": pair,
                    "section": "model_mcnemar",
                    "name": template,
                    "metric": metric,
                    "value": test[metric],
                    "n": test["n"],
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
    rows = [[pair] + [p_value(m["mcnemar"].get(pair, {}).get("p_value")) for m in models.values()] for pair in pairs]
    tables["mcnemar"] = latex_table(
        "McNemar tests between templates (continuity-corrected chi-square, two-sided p)",
        "tab:hc-mcnemar",
        ["Templates", *models],
        rows,
    )
    quartiles = [
        [name, template, *(pct(g["macro_f1"]) for g in groups), " / ".join(str(g["n"]) for g in groups)]
        for name, model in models.items()
        for template, groups in model["by_context_quartile"].items()
    ]
    if quartiles:
        tables["macro_f1_by_context_quartile"] = latex_table(
            "Macro F1 (%) by context-length quartile (four equal groups by the words of the documents shown)",
            "tab:hc-quartiles",
            ["Model", "Template", "Q1", "Q2", "Q3", "Q4", "n"],
            quartiles,
        )
    comparisons = [
        [template, pair, f"{test['b']}/{test['c']}", p_value(test["p_value"])]
        for template, tests in report.get("model_mcnemar", {}).items()
        for pair, test in tests.items()
    ]
    if comparisons:
        tables["model_mcnemar"] = latex_table(
            "McNemar tests between models on the same template (b/c: discordant pairs; two-sided p)",
            "tab:hc-model-mcnemar",
            ["Template", "Models", "b/c", "p"],
            comparisons,
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

    out["accuracy_by_context_quartile"] = _by_quartile(models, "accuracy", "Accuracy")
    out["macro_f1_by_context_quartile"] = _by_quartile(models, "macro_f1", "Macro-F1")  # the paper's Fig. 7
    return out


def _by_quartile(models: dict[str, Any], metric: str, label: str) -> Any:
    """One line per model x template of ``metric`` over the context-length quartiles."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for name, model in models.items():
        for template, groups in model["by_context_quartile"].items():
            figure.add_trace(
                go.Scatter(
                    x=[f"Q{g['quartile']}" for g in groups],
                    y=[g[metric] for g in groups],
                    mode="lines+markers",
                    name=f"{name} {template}",
                )
            )
    figure.update_layout(
        title=f"{label} by context-length quartile (words of the documents shown)",
        yaxis={"range": [0, 1], "tickformat": ".0%"},
    )
    return figure


write_report = ReportWriter(CSV_COLUMNS, metric_rows, latex_tables, build_figures).write
DESIGN = RunDesign(BENCHMARK, is_run_dir, read_run_data, healthcontradict_report, write_report)


def combined_report(run_dirs: list[Path]) -> dict[str, Any]:
    """One report over several run directories (e.g. one per model): every model side by side (Table 5),
    McNemar between models on each template, macro-F1 by context quartile.

    The directories must hold the same instances where they overlap (id, question and answer; an NC-only
    run without documents combines with a full one). A model label used in two directories becomes
    "label (directory)".
    """
    datas = [(run_dir, read_run_data(run_dir)) for run_dir in run_dirs]
    instances: dict[str, HCInstance] = {}
    for run_dir, data in datas:
        for instance in data.instances:
            known = instances.get(instance.instance_id)
            if known is not None and _identity(known) != _identity(instance):
                raise RunDirError(
                    f"{run_dir}: instance {instance.instance_id} differs from the one in another run directory "
                    "(question, answer or topic); these runs are not on the same benchmark"
                )
            if known is None or (not (known.doc_a or known.doc_b) and (instance.doc_a or instance.doc_b)):
                instances[instance.instance_id] = instance  # keep the documents when one run has them
    labels: dict[str, set[str]] = defaultdict(set)
    for run_dir, data in datas:
        for prediction in data.predictions:
            labels[prediction.model].add(run_dir.name)
    predictions, failures = [], []
    for run_dir, data in datas:

        def rename(label: str, directory: str = run_dir.name) -> str:
            return label if len(labels.get(label, ())) <= 1 else f"{label} ({directory})"

        predictions += [replace(p, model=rename(p.model)) for p in data.predictions]
        for record in data.failures:
            meta = dict(record.get("meta") or {})
            meta["label"] = rename(meta.get("label") or record["key"]["model"])
            failures.append({**record, "meta": meta})
    merged = HCRunData(list(instances.values()), predictions, failures, sum(d.corrupt_lines for _r, d in datas))
    report = healthcontradict_report(merged)
    report["combined"] = True
    report["run_dirs"] = [run_dir.name for run_dir, _data in datas]
    return report


def _identity(instance: HCInstance) -> tuple[Any, ...]:
    return instance.instance_id, instance.topic_id, instance.query, instance.query_stance
