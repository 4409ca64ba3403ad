"""Writing one benchmark report to disk: report.json, metrics.csv, LaTeX tables, Plotly figures (HTML, PNG).

Shared by the HealthContradict and Trojan presenters so every benchmark's report folder has the same
shape as MedMisBench's (``bench_core.medmisbench.report.write_report``), and reuses its LaTeX table and Chromium
helpers rather than copying them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench_core.kernel import latex
from bench_core.medmisbench.report import latex_escape, write_figures, write_tables

__all__ = ["latex_escape", "latex_table", "pct", "write_report_files"]


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage with ``digits`` decimals ("–" when undefined)."""
    return "–" if value is None else f"{100 * value:.{digits}f}"


def latex_table(caption: str, label: str, header: list[str], rows: list[list[str]]) -> str:
    """A booktabs table (first column left-aligned, the rest right-aligned), cells escaped."""
    return latex.table(caption, label, header, rows, placement="t")


def write_report_files(
    report: dict[str, Any],
    out_dir: Path,
    *,
    csv_columns: Sequence[str],
    csv_rows: Iterable[dict[str, Any]],
    tables: dict[str, str],
    figures: Callable[[dict[str, Any]], dict[str, Any]] | None,
    png: bool = True,
) -> list[Path]:
    """Write the report's files under ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    path = out_dir / "report.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    written.append(path)
    path = out_dir / "metrics.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(csv_columns))
        writer.writeheader()
        writer.writerows(csv_rows)
    written.append(path)
    written += write_tables(out_dir, tables)
    if figures is not None:
        written += write_figures(out_dir, figures(report), png=png)
    return written
