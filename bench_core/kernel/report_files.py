"""Writing a report to disk: JSON, CSV, LaTeX tables, Plotly figures (HTML, and PNG through Chromium).

Every design's report folder has the same shape (``report.json``, ``metrics.csv``, one ``.tex`` file per
table, each figure as HTML and PNG), so a design's report module says only what goes in it: its CSV
columns and rows, its LaTeX tables and its figures (``ReportWriter``). The writers here never compute a
number: they lay out the report object built by the design's metrics.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_core.kernel import latex

Rows = Iterable[Mapping[str, Any]]


def pct(value: float | None, digits: int = 1, *, signed: bool = False) -> str:
    """A fraction as a percentage with ``digits`` decimals ("–" when undefined; ``signed``: "+1.0")."""
    if value is None:
        return "–"
    return f"{100 * value:+.{digits}f}" if signed else f"{100 * value:.{digits}f}"


def p_value(value: float | None) -> str:
    """A p-value as tables print it: three decimals, "<0.001" below that ("–" when undefined)."""
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def latex_table(caption: str, label: str, header: list[str], rows: list[list[str]]) -> str:
    """A booktabs table (first column left-aligned, the rest right-aligned), cells escaped."""
    return latex.table(caption, label, header, rows, placement="t")


def error_bars(values: Sequence[float | None], cis: Sequence[Sequence[float] | None]) -> dict[str, Any]:
    """Plotly ``error_y`` for rates with (possibly asymmetric, possibly missing) confidence intervals."""
    pairs = list(zip(values, cis, strict=True))
    return {
        "type": "data",
        "symmetric": False,
        "array": [ci[1] - v if ci and v is not None else 0 for v, ci in pairs],
        "arrayminus": [v - ci[0] if ci and v is not None else 0 for v, ci in pairs],
    }


def chromium_path() -> str | None:
    """The Chromium that kaleido renders PNG figures with (BROWSER_PATH, Debian's, or on PATH), if any."""
    for candidate in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def write_csv(path: Path, columns: Sequence[str], rows: Rows) -> Path:
    """A CSV file with ``columns``; keys outside them are left out, list cells are joined with "; "."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "; ".join(v) if isinstance(v, list) else v for k, v in row.items()})
    return path


def write_tables(out_dir: Path, tables: Mapping[str, str]) -> list[Path]:
    """One ``<name>.tex`` file per LaTeX table."""
    written = []
    for name, text in tables.items():
        path = out_dir / f"{name}.tex"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def write_figures(out_dir: Path, figures: Mapping[str, Any], *, png: bool = True) -> list[Path]:
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


def write_report_files(
    report: dict[str, Any],
    out_dir: Path,
    *,
    csv_files: Mapping[str, tuple[Sequence[str], Rows]],
    tables: Mapping[str, str],
    figures: Callable[[dict[str, Any]], Mapping[str, Any]] | None,
    png: bool = True,
    json_name: str = "report.json",
) -> list[Path]:
    """Write the report as JSON, its CSV files (name -> (columns, rows)), tables and figures; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_json(out_dir / json_name, report)]
    written += [write_csv(out_dir / name, columns, rows) for name, (columns, rows) in csv_files.items()]
    written += write_tables(out_dir, tables)
    if figures is not None:
        written += write_figures(out_dir, figures(report), png=png)
    return written


@dataclass(frozen=True)
class ReportWriter:
    """What a design's report folder holds: ``metrics.csv`` (columns, rows), LaTeX tables and figures."""

    csv_columns: Sequence[str]
    metric_rows: Callable[[dict[str, Any]], Rows]
    latex_tables: Callable[[dict[str, Any]], Mapping[str, str]]
    build_figures: Callable[[dict[str, Any]], Mapping[str, Any]]

    def write(self, report: dict[str, Any], out_dir: Path, *, figures: bool = True, png: bool = True) -> list[Path]:
        """report.json, metrics.csv, LaTeX tables and figures (HTML, PNG) under ``out_dir``."""
        return write_report_files(
            report,
            out_dir,
            csv_files={"metrics.csv": (self.csv_columns, self.metric_rows(report))},
            tables=self.latex_tables(report),
            figures=self.build_figures if figures else None,
            png=png,
        )
