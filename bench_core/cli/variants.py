"""The benchmark-variant commands of the ``bench`` group: regenerate, reassign-provenance and compare-runs.

A variant is a benchmark rebuilt from a stratified subset of another with one thing changed (the
generator, or the provenance each item is framed with); ``compare-runs`` puts evaluation runs of the
variants side by side on their matched items. Registered by ``cli.generation.register``; flags are a
contract (docs/command-line.md: add, never rename).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.table import Table

import bench_core.cli.generator_endpoint as generator
from bench_core.cli.common import ReportConsole, check_endpoint, err, fail, write_folder
from bench_core.cli.option_groups import takes
from bench_core.kernel.report_files import pct


def _sensitivity(
    kind: str,
    from_: Path,
    model: str,
    base_url: str,
    out: Path,
    per_subset: str | None,
    size: int | None,
    seed: int,
    options: generator.GeneratorOptions,
) -> None:
    """Select the stratified subset, write the reference, regenerate every variant, compare the bundles."""
    from bench_core.generation.pipeline import (
        GenerationDirError,
        GenerationRun,
        append_manifest,
        check_generator,
        register_items,
    )
    from bench_core.generation.sensitivity import (
        SensitivityError,
        load_benchmark,
        parse_quotas,
        plans_for,
        prepare,
        stratified_subset,
    )
    from bench_core.kernel.errors import DatasetError

    check_endpoint(options.provider, base_url)  # every argument is checked before anything is written
    generator.check_structured(options.structured)
    try:
        items = load_benchmark(from_)
        quotas = parse_quotas(per_subset)
        selected = stratified_subset(items, seed=seed, per_subset=quotas or None, size=size)
        if not selected:
            fail(f"no item with a usable bundle in {from_}")
        plan = prepare(
            out, selected, kind=kind, source=str(from_), seed=seed, quotas={"per_subset": quotas, "size": size}
        )
        settings = options.settings("fixed", seed)
    except (DatasetError, SensitivityError, ValueError) as exc:
        fail(str(exc))
    err.print(
        f"{plan['n_selected']} item(s) selected ("
        + ", ".join(f"{k} {v}" for k, v in plan["selected_by_subset"].items())
        + f"); reference benchmark: {out / 'reference' / 'benchmark'}",
        highlight=False,
    )
    provider_errors = 0
    for variant in plan["variants"]:
        directory = out / variant
        try:
            chat_model = options.chat_model(model, base_url)
            check_generator(directory, chat_model, settings)
            registered = register_items(directory, selected)
            run = GenerationRun(
                directory,
                registered,
                settings,
                chat_model,
                plans=plans_for(registered, variant),
                structured=options.structured,
            )
        except (GenerationDirError, SensitivityError, ValueError, ImportError) as exc:
            fail(str(exc))
        append_manifest(
            directory,
            {
                "command": kind,
                "variant": variant,
                "from": str(from_),
                "model": model,
                "provider": options.provider,
                "endpoint": chat_model.endpoint,
                "settings": settings.as_dict(),
                "config_hash": settings.config_hash,
                "max_attempts": settings.max_attempts,
                "structured": run.structured,
                "api_key_env": options.api_key_env,
                "n_items": len(registered),
            },
        )
        provider_errors += generator.run_generation(run, options, label=variant)["provider_errors"]
    _print_comparison(out)
    names = ", ".join(["reference", *plan["variants"]])
    err.print(
        f"Benchmarks to evaluate ({names}): {out}/<name>/benchmark; run each with the same "
        "medrev bench run medmisbench --seed, then compare with medrev bench compare-runs.",
        highlight=False,
    )
    if provider_errors:
        raise typer.Exit(1)


def _print_comparison(out: Path) -> None:
    from bench_core.generation.report import html_page, html_table
    from bench_core.generation.sensitivity import compare_bundles

    comparison = compare_bundles(out)
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2, ensure_ascii=False), encoding="utf-8")
    header = ["variant", "generator", "items", "kept", "labels as planned", "provenance", "mean chars"]
    header += ["mean mislead", "overlap with reference", "failed"]
    rows = []
    for name, v in comparison["variants"].items():
        rows.append(
            [
                name,
                v.get("generator") or "(original)",
                v["n_items"],
                v["kept"],
                v.get("labels_as_planned", "–"),
                ", ".join(f"{k} {n}" for k, n in sorted(v["provenance"].items())),
                _fmt(v["mean_sentence_chars"]),
                _fmt(v.get("mean_mislead_score")),
                _fmt(v.get("mean_word_overlap_with_reference"), 2),
                ", ".join(f"{k} {n}" for k, n in v.get("failed_by_reason", {}).items()) or "–",
            ]
        )
    table = Table(title=f"Bundles by variant ({comparison['kind']})", title_justify="left")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(cell) for cell in row))
    err.print(table)
    page = html_page(f"Sensitivity: {comparison['kind']}", [html_table("Bundles by variant", header, rows)])
    (out / "comparison.html").write_text(page, encoding="utf-8")


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


FROM = typer.Option(..., "--from", help="Benchmark: released-format file or folder, or a generation directory.")
SENSITIVITY_OUT = typer.Option(..., "--out", help="Output directory (reference + one generation dir per variant).")
PER_SUBSET = typer.Option(None, "--per-subset", help="Items per subset, e.g. MEDMISQA=150,MEDMISMCQA=180.")
SIZE = typer.Option(None, "--size", min=1, help="Total items, split over subsets in proportion (default: all).")


def _sensitivity_command(kind: str, help_text: str) -> Callable[..., None]:
    """A sensitivity command (``regenerate`` or ``reassign-provenance``): the same flags, its own kind and help."""

    @takes(generator.GeneratorOptions, "options")
    def command(
        from_: Path = FROM,
        model: str = generator.MODEL,
        base_url: str = generator.BASE_URL,
        out: Path = SENSITIVITY_OUT,
        per_subset: str | None = PER_SUBSET,
        size: int | None = SIZE,
        seed: int = generator.SEED,
        *,
        options: generator.GeneratorOptions,
    ) -> None:
        _sensitivity(kind, from_, model, base_url, out, per_subset, size, seed, options)

    command.__doc__ = help_text
    return command


regenerate = _sensitivity_command(
    "regenerate",
    "Generator sensitivity: another generator rewrites a stratified subset (item, target, labels held fixed).",
)
reassign_provenance = _sensitivity_command(
    "reassign",
    "Provenance sensitivity: forward and reverse cyclic reassignment of a stratified subset, rewritten per frame.",
)


def compare_runs(
    run: list[str] = typer.Option(..., "--run", help="NAME=RUN_DIR (repeat); the first is the reference."),
    pool: list[str] = typer.Option([], "--pool", help="NAME=A,B pools runs A and B, e.g. shuffled=forward,reverse."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    out: Path | None = typer.Option(None, "--out", help="Also write compare_runs.json and .html here."),
) -> None:
    """Compare evaluation runs of benchmark variants on their matched items (ASR, TASR per model and provenance)."""
    from bench_core.generation.report import html_page, html_table
    from bench_core.generation.sensitivity import SensitivityError
    from bench_core.generation.sensitivity import compare_runs as compare
    from bench_core.medmisbench.run import RunDirError

    def pairs(values: list[str], flag: str) -> dict[str, str]:
        parsed = {}
        for value in values:
            name, sep, rest = value.partition("=")
            if not sep or not name.strip() or not rest.strip():
                fail(f"{flag} {value!r}: expected NAME=VALUE")
            parsed[name.strip()] = rest.strip()
        return parsed

    runs = pairs(run, "--run")
    pools = {name: [m.strip() for m in members.split(",")] for name, members in pairs(pool, "--pool").items()}
    try:
        result = compare(runs, pools)
    except (SensitivityError, RunDirError) as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    console = ReportConsole()  # tables that do not fit are stacked, user text printed as is
    header = ["variant", "model", "clean acc", "T1 ASR", "T1 TASR", "T2 ASR", "ΔT1 ASR", "ΔT2 ASR"]
    frames = sorted({f for v in result["variants"].values() for m in v["models"].values() for f in m["provenance"]})
    header += [f"T1 ASR {f}" for f in frames]
    rows = []
    for name, variant in result["variants"].items():
        for label, model in variant["models"].items():
            c = model["conditions"]
            delta = model.get("delta_vs_reference", {})
            rows.append(
                [
                    name,
                    label,
                    pct(c.get("clean", {}).get("accuracy")),
                    pct(c.get("type1", {}).get("asr")),
                    pct(c.get("type1", {}).get("tasr")),
                    pct(c.get("type2", {}).get("asr")),
                    pct(delta.get("type1_asr"), signed=True) if delta else "",
                    pct(delta.get("type2_asr"), signed=True) if delta else "",
                    *(pct(model["provenance"].get(f, {}).get("type1", {}).get("asr")) for f in frames),
                ]
            )
    title = f"{result['n_matched_items']} matched item(s); reference {result['reference']}; rates in %"
    table = Table(title=title, title_justify="left")
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if out is not None:
        page = html_page("Benchmark variants compared", [html_table(title, header, rows)])

        def write(folder: Path) -> list[Path]:
            text = json.dumps(result, indent=2, ensure_ascii=False)
            (folder / "compare_runs.json").write_text(text, encoding="utf-8")
            (folder / "compare_runs.html").write_text(page, encoding="utf-8")
            return [folder / "compare_runs.json", folder / "compare_runs.html"]

        write_folder(out, write)  # nothing half-written
        console.print(f"wrote {out / 'compare_runs.json'} and {out / 'compare_runs.html'}", highlight=False)
