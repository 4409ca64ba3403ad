"""The ``bench`` command group: run benchmarks against model endpoints and report their metrics.

Mounted as ``medrev bench`` by ``review_app.cli``; also runnable as ``python -m bench_core``.
Flags and JSON keys are the contract of docs/command-line.md (add, never rename). This module builds
the group and registers each design's commands (``cli/<design>.py``; benchmark building in
``cli/generation.py`` and ``cli/variants.py``); ``report`` is here because it serves every design:
the list of designs is made here, the one layer that imports several of them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from bench_core.cli.batch import PRICE_FILE, batch_app, load_price_file, print_usage_table
from bench_core.cli.common import ReportConsole, err, fail, run_directory, write_folder
from bench_core.cli.errors import DEBUG_HELP, MedrevGroup, debug_option
from bench_core.cli.generation import register as register_generation
from bench_core.cli.healthcontradict import run_healthcontradict
from bench_core.cli.medmisbench import run_medmisbench
from bench_core.cli.mitigation import compare
from bench_core.cli.trojan import ingest_app, run_trojan
from bench_core.kernel.rundir import RunDesign, find_run_dirs

app = typer.Typer(
    help="Run benchmarks against model endpoints and report their metrics.", no_args_is_help=True, cls=MedrevGroup
)
run_app = typer.Typer(help="Evaluate a model on a benchmark.", no_args_is_help=True)
app.add_typer(run_app, name="run")


@app.callback()
def bench(debug: bool = typer.Option(False, "--debug", help=DEBUG_HELP)) -> None:
    """Run benchmarks against model endpoints and report their metrics."""
    debug_option(debug)


register_generation(app)  # generate, generate-report, regenerate, reassign-provenance, compare-runs
# each run command's --out is guarded: one benchmark, one process, nothing left behind by a refused run
run_app.command("medmisbench")(run_directory("medmisbench")(run_medmisbench))
run_app.command("healthcontradict")(run_directory("healthcontradict")(run_healthcontradict))
run_app.command("trojan")(run_directory("trojan")(run_trojan))
app.add_typer(ingest_app, name="ingest")
app.add_typer(batch_app, name="batch")


def designs() -> dict[str, tuple[RunDesign, Callable[[dict[str, Any], Console], None]]]:
    """Every design ``bench report`` knows: benchmark -> (its ``RunDesign``, its terminal printer), in lookup order."""
    from bench_core.cli import healthcontradict, medmisbench, trojan
    from bench_core.healthcontradict.report import DESIGN as HEALTHCONTRADICT
    from bench_core.medmisbench.report import DESIGN as MEDMISBENCH
    from bench_core.trojan.report import DESIGN as TROJAN

    return {
        MEDMISBENCH.benchmark: (MEDMISBENCH, medmisbench.print_report),
        HEALTHCONTRADICT.benchmark: (HEALTHCONTRADICT, healthcontradict.print_report),
        TROJAN.benchmark: (TROJAN, trojan.print_report),
    }


def combiners() -> dict[str, tuple[Callable[[list[Path]], dict[str, Any]], Callable[[dict[str, Any], Console], None]]]:
    """Designs whose run directories combine into one report (one directory per model, side by side):
    benchmark -> (combine the directories, print the combined report)."""
    from bench_core.cli import healthcontradict, medmisbench
    from bench_core.healthcontradict.report import combined_report as healthcontradict_combined
    from bench_core.medmisbench.report import combined_report as medmisbench_combined

    return {
        "medmisbench": (medmisbench_combined, medmisbench.print_combined),
        "healthcontradict": (healthcontradict_combined, healthcontradict.print_combined),
    }


@app.command("report")
def report(
    directories: list[Path] = typer.Argument(
        ...,
        help="Run directories, or folders of run directories. Several of one benchmark (e.g. one per model) "
        "are also reported together: the paper's tables with every model side by side.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (one object per run directory)."),
    out: Path | None = typer.Option(None, "--out", help="Where to write tables and figures (default DIR/report)."),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="Write Plotly figures (HTML; PNG with --png)."),
    png: bool = typer.Option(
        False, "--png/--no-png", help="Also render figures to PNG (needs Chromium; seconds per figure)."
    ),
    combined: bool = typer.Option(
        False,
        "--combined",
        help="Only the report over all run directories of a benchmark (with --json: one object per benchmark).",
    ),
    price_file: Path | None = PRICE_FILE,
) -> None:
    """Metrics of run directories (any benchmark): terminal tables, or JSON with --json; files under DIR/report."""
    known = designs()
    prices = load_price_file(price_file)
    if out is not None and out.exists() and not out.is_dir():
        fail(f"{out}: --out is a file, expected a folder for the report's tables and figures")
    run_dirs: list[tuple[Path, RunDesign]] = []
    for directory in directories:
        if not directory.exists():
            fail(f"{directory}: no such directory")
        if not directory.is_dir():
            fail(f"{directory}: is a file, expected a run directory (or a folder of run directories)")
        found = find_run_dirs(directory, [design for design, _printer in known.values()])
        if not found:
            fail(
                f"{directory} is not a run directory and holds none (expected runs.jsonl beside items.jsonl, "
                "instances.jsonl or records.json)"
            )
        run_dirs += [entry for entry in found if entry not in run_dirs]
    together = combiners()
    by_design: dict[str, list[Path]] = {}
    for run_dir, design in run_dirs:
        by_design.setdefault(design.benchmark, []).append(run_dir)
    joined = {b for b, dirs in by_design.items() if len(dirs) > 1 and b in together}
    console = ReportConsole()  # tables that do not fit are stacked, user text printed as is
    for run_dir, design in run_dirs:
        if combined and design.benchmark in joined:
            continue
        try:
            result = design.build(run_dir)
        except ValueError as exc:  # every design's RunDirError, DamagedFile and DatasetError is a ValueError
            fail(str(exc))
        except (KeyError, TypeError) as exc:  # a file edited by hand or written by something else
            fail(f"{run_dir}: a file of this run directory is not as medrev wrote it ({type(exc).__name__}: {exc})")
        result["run_dir"] = str(run_dir)
        from bench_core.kernel.pricing import run_usage

        result["usage"] = run_usage(run_dir, prices)  # tokens the providers returned; cost with --price-file
        for warning in result.get("warnings", []):
            err.print(f"note: {warning}")
        if as_json:
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
            continue
        known[design.benchmark][1](result, console)
        print_usage_table(result["usage"], console)
        target = out if out is not None and len(run_dirs) == 1 else (out or run_dir / "report")
        if out is not None and len(run_dirs) > 1:
            target = out / run_dir.name
        written = write_folder(target, partial(design.write_report, result, figures=figures, png=png))
        console.print(f"wrote {len(written)} files to {target}")
    for benchmark in sorted(joined):
        dirs = by_design[benchmark]
        combine, printer = together[benchmark]
        try:
            result = combine(dirs)
        except ValueError as exc:
            fail(str(exc))
        if as_json:
            if combined:
                sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
            continue
        printer(result, console)
        parent = Path(os.path.commonpath([str(d.resolve()) for d in dirs]))
        target = (out if out is not None else parent / "report") / f"combined-{benchmark}"
        written = write_folder(target, partial(known[benchmark][0].write_report, result, figures=figures, png=png))
        console.print(f"wrote {len(written)} files to {target}")


app.command("compare")(compare)


if __name__ == "__main__":
    app()
