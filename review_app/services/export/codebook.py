"""The export's codebook (``codebook.json`` and ``codebook.md``) and the software versions its manifest records.

The codebook describes every file of the export column by column (the tables' own documentation, see
``export.tables``), how CSV cells are escaped, and how to refit the harm model from its input table in R
or with medrev; docs/data-formats.md describes the same files for a maintainer.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from bench_core.kernel.latex import packages
from review_app.services.export.tables import CSV_ESCAPING_RULE, Table, column_type


def build(
    tables: list[Table], formats: tuple[str, ...], latex: dict[str, str], refit: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``codebook.json``: every table's files, rows and documented columns, the LaTeX files, the CSV rule, the refit."""
    files = []
    for table in tables:
        files.append(
            {
                "table": table.name,
                "files": [f"{table.name}.{fmt}" for fmt in formats],
                "description": table.description,
                "rows": table.rows,
                "columns": [
                    {
                        "name": column,
                        "type": column_type(table.frame[column]),
                        "description": table.columns[column],
                        **({"values": table.values[column]} if column in table.values else {}),
                    }
                    for column in table.frame.columns
                ],
            }
        )
    return {
        "tables": files,
        "latex": {
            name: f"booktabs table ready to paste into a paper (preamble: \\usepackage{{{','.join(packages(source))}}})"
            for name, source in sorted(latex.items())
        },
        "csv_escaping": CSV_ESCAPING_RULE,
        "missing_values": "Empty CSV cells, JSON null and Parquet null mean 'no value'.",
        "harm_model": refit,
    }


def markdown(codebook: dict[str, Any], study: str) -> str:
    """``codebook.md``: the same codebook for a reader, with the harm model's refit in R and with medrev."""
    lines = [f"# Codebook: export of study {study}", "", codebook["missing_values"], "", codebook["csv_escaping"], ""]
    for table in codebook["tables"]:
        lines += [f"## {table['table']}", "", table["description"], ""]
        lines += [f"Files: {', '.join(f'`{f}`' for f in table['files'])}; {table['rows']} rows.", ""]
        lines += ["| column | type | description |", "| --- | --- | --- |"]
        for column in table["columns"]:
            text = column["description"]
            if "values" in column:
                text += " Values: " + "; ".join(f"`{k}` = {v}" for k, v in column["values"].items())
            lines.append(f"| `{column['name']}` | {column['type']} | {text.replace('|', '/')} |")
        lines.append("")
    if codebook["latex"]:
        lines += ["## LaTeX tables", ""]
        lines += [f"- `{name}`: {text}" for name, text in codebook["latex"].items()]
        lines.append("")
    refit = codebook.get("harm_model")
    if refit:
        lines += [
            "## Refitting the harm model",
            "",
            f"Model: `{refit['formula']}` ({refit['estimation']}). Input: `harm_model_input.csv` (rows with "
            "`in_model` true).",
            "",
            "Reference levels (the first level of each factor; odds ratios compare every other level with it):",
            "",
            *(
                f"- `{column}`: `{level}` ({refit['reference_sources'].get(column, 'given')})"
                for column, level in refit["reference_levels"].items()
            ),
            "",
            f"Penalty: {refit['penalty']} ({refit['penalty_description']}).",
            "",
        ]
        if refit["separated_terms"]:
            lines += [f"Separated terms: {', '.join(f'`{t}`' for t in refit['separated_terms'])}.", ""]
        lines += [*(f"{note}" for note in refit["notes"]), ""] if refit["notes"] else []
        lines += ["In R:", "", "```r", refit["r_code"].rstrip(), "```", "", "With medrev:", "", "```sh"]
        lines += [refit["medrev_command"], "```", ""]
    lines += [
        "## manifest.json",
        "",
        "SHA-256 checksums and sizes of every other file, row counts, software versions, snapshot time, study "
        "settings, database backend and whether reviewers are pseudonymised.",
        "",
    ]
    return "\n".join(lines)


def software_versions() -> dict[str, str]:
    """The versions of Python and of the packages that computed the export, for its manifest."""
    versions = {"python": platform.python_version()}
    for package in ("medrev", "pandas", "numpy", "scipy", "statsmodels", "krippendorff", "pyarrow"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def medrev_version() -> str:
    """The installed medrev version (the source tree's when medrev runs uninstalled)."""
    try:
        return metadata.version("medrev")
    except metadata.PackageNotFoundError:
        from review_app import __version__

        return __version__
