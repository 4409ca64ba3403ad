"""The benchmark-building commands of the ``bench`` group: generate and generate-report.

Registered on ``bench_core.cli.main.app`` by ``register``, with the benchmark-variant commands of
``cli.variants``; the generator's options and endpoint are ``cli.generator_endpoint``. Flags are a
contract (docs/command-line.md: add, never rename); runs are resumable like evaluation runs (same
store, same retry policy).
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

import bench_core.cli.generator_endpoint as generator
from bench_core.cli.batch import BatchOptions
from bench_core.cli.common import ReportConsole, check_endpoint, err, fail, run_directory, write_folder
from bench_core.cli.option_groups import takes
from bench_core.cli.variants import compare_runs, reassign_provenance, regenerate


def _report(directory: Path, console: Console, *, write: bool = True) -> dict[str, Any]:
    from bench_core.generation.report import REPORT_DIR, construction_report, write_construction_report

    report = construction_report(directory)
    print_construction_report(report, console)
    if write:
        written = write_folder(directory / REPORT_DIR, partial(write_construction_report, report))
        console.print(f"wrote {', '.join(str(p) for p in written)}", highlight=False)
    return report


@takes(BatchOptions, "batching")
@takes(generator.GeneratorOptions, "options")
def generate(
    source: Path = typer.Option(..., "--source", help="Source dataset file or folder."),
    fmt: str = typer.Option(..., "--format", help="medqa|medmcqa|medxpertqa|medjourney|hle|medrev"),
    model: str = generator.MODEL,
    base_url: str = generator.BASE_URL,
    out: Path = typer.Option(..., "--out", help="Generation directory (created; reruns resume in it)."),
    seed: int = generator.SEED,
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="Only the first N loaded items (items of earlier runs in --out continue too)."
    ),
    one_call: bool = typer.Option(False, "--one-call", help="Decide and generate in one call (as the notebook)."),
    provenance: str = typer.Option("balanced", "--provenance", help="uniform|balanced provenance sampling."),
    subset: str | None = typer.Option(None, "--subset", help="Subset name (default per format, e.g. MEDMISQA)."),
    cop_base: int | None = typer.Option(None, "--cop-base", help="MedMCQA: 0 or 1-based cop (default: detect)."),
    all_question_types: bool = typer.Option(
        False, "--all-question-types", help="MedXpertQA: keep 'Understanding' items too (default: reasoning only)."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse the source if any row is malformed (the default; kept for old scripts)."
    ),
    skip_bad_rows: bool = typer.Option(
        False, "--skip-bad-rows", help="Use the well-formed rows of a source with malformed ones, naming each."
    ),
    *,
    options: generator.GeneratorOptions,
    batching: BatchOptions,
) -> None:
    """Build a MedMisBench-style benchmark from a multiple-choice QA set with an LLM generator."""
    check_endpoint(options.provider, base_url)  # every argument is checked before anything is written
    batching.check()
    from bench_core.generation.pipeline import (
        GenerationDirError,
        GenerationRun,
        append_manifest,
        check_generator,
        register_items,
        save_source_report,
    )
    from bench_core.generation.sources import SOURCE_FORMATS, load_source
    from bench_core.kernel.errors import DatasetError

    if fmt not in SOURCE_FORMATS:
        fail(f"unknown --format {fmt!r}; expected one of {', '.join(SOURCE_FORMATS)}")
    generator.check_structured(options.structured)
    try:
        settings = options.settings("one_call" if one_call else "two_stage", seed, provenance_sampling=provenance)
        loaded = load_source(
            source,
            fmt,
            subset=subset,
            cop_base=cop_base,
            reasoning_only=not all_question_types,
            strict=strict or not skip_bad_rows,
        )
    except DatasetError as exc:
        fail(str(exc))
    except ValueError as exc:
        fail(str(exc))
    for note in loaded.notes:
        err.print(f"note: {note}", highlight=False)
    if loaded.dropped:
        counts = ", ".join(f"{reason} {n}" for reason, n in loaded.counts().items())
        err.print(f"{len(loaded.dropped)} of {loaded.n_rows} source rows not used ({counts})", highlight=False)
        for dropped in loaded.malformed:  # --skip-bad-rows: every skipped row is named
            err.print(f"not loaded: {dropped.issue}", highlight=False)
    items = loaded.items[:limit] if limit else loaded.items
    if not items:
        fail(f"no item could be loaded from {source}")
    try:
        chat_model = options.chat_model(model, base_url)
        check_generator(out, chat_model, settings)
        registered = register_items(out, items)
        run = GenerationRun(out, registered, settings, chat_model, structured=options.structured)
    except (GenerationDirError, ValueError, ImportError) as exc:
        fail(str(exc))
    save_source_report(out, loaded, source)
    append_manifest(
        out,
        {
            "command": "generate",
            "source": str(source),
            "format": fmt,
            "model": model,
            "provider": options.provider,
            "endpoint": chat_model.endpoint,
            "settings": settings.as_dict(),
            "config_hash": settings.config_hash,
            "max_attempts": options.max_attempts,
            "structured": run.structured,
            "api_key_env": options.api_key_env,
            "concurrency": options.concurrency,
            "batch": batching.batch,
            "limit": limit,
            "n_loaded": len(loaded.items),
            "n_items": len(registered),
            "source_dropped_by_reason": loaded.counts(),
        },
    )
    result = generator.run_generation(run, options, label=model, batch=batching)
    _report(out, err)
    if result["provider_errors"]:
        raise typer.Exit(1)


def generate_report(
    directory: Path = typer.Argument(..., help="A generation directory (made by bench generate)."),
    as_json: bool = typer.Option(False, "--json", help="Print the construction report as JSON."),
) -> None:
    """The construction report of a generation directory: terminal tables, or JSON with --json; files in DIR/report."""
    from bench_core.generation.pipeline import is_generation_dir
    from bench_core.generation.report import construction_report

    if not is_generation_dir(directory):
        fail(f"{directory} is not a generation directory (expected source_items.jsonl and generation_runs.jsonl)")
    if as_json:
        sys.stdout.write(json.dumps(construction_report(directory), ensure_ascii=False) + "\n")
        return
    _report(directory, ReportConsole())


def register(app: typer.Typer) -> None:
    """Add the benchmark-building commands, and the benchmark-variant ones, to the ``bench`` group."""
    app.command("generate")(run_directory("medmisbench-generation")(generate))
    app.command("generate-report")(generate_report)
    app.command("regenerate")(run_directory("medmisbench-sensitivity")(regenerate))
    app.command("reassign-provenance")(run_directory("medmisbench-sensitivity")(reassign_provenance))
    app.command("compare-runs")(compare_runs)


def print_construction_report(report: dict[str, Any], console: Console) -> None:
    """Readable tables of a construction report."""
    from bench_core.generation.report import number_text, reasons_text
    from bench_core.medmisbench import taxonomy

    console.rule(f"Benchmark construction: {report['run_dir']}")
    generator = report["generator"]
    console.print(
        f"generator {generator['model']} at {generator['endpoint']} "
        f"(settings {generator['config_hash']}); {report['n_items']} item(s): "
        + ", ".join(f"{n} {status}" for status, n in report["status"].items()),
        highlight=False,
    )
    if report["sources"]:
        loaded = Table(title="Source rows (loader)", title_justify="left")
        for column in ("format", "files", "rows", "kept", "dropped", "dropped by reason"):
            loaded.add_column(column, justify="right" if column in ("rows", "kept", "dropped") else "left")
        for source in report["sources"]:
            loaded.add_row(
                source["format"],
                ", ".join(Path(f).name for f in source["files"]),
                str(source["n_rows"]),
                str(source["n_kept"]),
                str(source["n_dropped"]),
                reasons_text(source["dropped_by_reason"]),
            )
        console.print(loaded)
        for source in report["sources"]:
            for note in source["notes"]:
                console.print(f"note: {note}", highlight=False)
    status = Table(title="Items per subset", title_justify="left")
    for column in ("subset", "items", "kept", "rejected", "failed", "pending"):
        status.add_column(column, justify="left" if column == "subset" else "right")
    status.add_column("why rejected / failed")
    for subset, entry in report["subsets"].items():
        why = "; ".join(
            part
            for part in (
                f"rejected: {reasons_text(entry['rejected_by_reason'])}" if entry["rejected_by_reason"] else "",
                f"failed: {reasons_text(entry['failed_by_reason'])}" if entry["failed_by_reason"] else "",
            )
            if part
        )
        status.add_row(
            subset, *(str(entry[k]) for k in ("n_items", "kept", "rejected", "failed", "pending")), why or "–"
        )
    console.print(status)
    frames = list(taxonomy.PROVENANCE_IDS)
    for subset, cells in report["content_x_provenance"].items():
        table = Table(title=f"Kept items by content type x provenance: {subset}", title_justify="left")
        table.add_column("content type")
        for frame in frames:
            table.add_column(frame, justify="right")
        table.add_column("total", justify="right")
        for content, row in cells.items():
            table.add_row(
                taxonomy.content_type(content).display_name, *(str(row[f]) for f in frames), str(sum(row.values()))
            )
        table.add_row(
            "total",
            *(str(sum(r[f] for r in cells.values())) for f in frames),
            str(sum(sum(r.values()) for r in cells.values())),
        )
        console.print(table)
    scores = Table(title="Scores of kept items (0-10)", title_justify="left")
    for column in ("subset", "score", "n", "mean", "median", "min", "max"):
        scores.add_column(column, justify="left" if column in ("subset", "score") else "right")
    for name in ("difficulty", "mislead_score"):
        for subset, dist in report[name].items():
            scores.add_row(
                subset, name, str(dist["n"]), *(number_text(dist[k]) for k in ("mean", "median", "min", "max"))
            )
    console.print(scores)
    if report["problems"]:
        console.print(f"Validation problems met (all attempts): {reasons_text(report['problems'])}", highlight=False)
