"""The benchmark-building commands of the ``bench`` group: generate, generate-report, and the sensitivity tools.

Registered on ``bench_core.cli.main.app`` by ``register``. Flags follow SPEC section 3 for ``generate`` (add, never
rename); runs are resumable like evaluation runs (same store, same retry policy).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from bench_core.cli.batch import BATCH, BATCH_FALLBACK, BATCH_SIZE, POLL_INTERVAL, PRICE_FILE, BatchOptions
from bench_core.cli.common import (
    ReportConsole,
    check_endpoint,
    err,
    fail,
    make_runner,
    non_negative,
    positive,
    run_directory,
    run_to_end,
    write_folder,
)
from bench_core.kernel.report_files import pct
from bench_core.medmisbench.targets import DEFAULT_SEED


class _Endpoint:
    """The generator endpoint and runner options shared by every command that calls a generator."""

    def __init__(self, **options: Any) -> None:
        self.__dict__.update(options)

    def model(self):
        from bench_core.kernel.providers import make_chat_model

        return make_chat_model(
            self.provider,
            self.model_name,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            connections=self.concurrency,
            max_tokens_param=self.max_tokens_param,
        )

    def runner(self, store):
        from bench_core.kernel.runner import RetryPolicy

        retry = RetryPolicy(max_attempts=self.call_attempts, max_total=self.max_total, base_delay=self.backoff)
        return make_runner(
            store,
            concurrency=self.concurrency,
            timeout=self.timeout,
            progress=self.progress,
            retry=retry,
            batch=getattr(self, "batch", None),
        )


def _execute(run, endpoint: _Endpoint, *, retry_failed: bool, label: str) -> dict[str, Any]:
    """Run a ``GenerationRun`` to completion (Ctrl-C: exit 130 with a resume hint), then write its outputs."""
    from bench_core.generation.pipeline import write_outputs

    runner = endpoint.runner(run.store)

    summary = run_to_end(lambda: run.run(runner, retry_failed=retry_failed), run.store, [run.model], runner)
    states = run.states()
    written = write_outputs(run, states)
    run.close()
    batching = getattr(endpoint, "batch", None)
    if batching is not None:
        batching.report(run.run_dir)
    for downgrade in run.downgrades:
        err.print(
            f"note: the endpoint refused response_format {downgrade['from']}; "
            f"fell back to {downgrade['to']} ({downgrade['calls']} call(s) repeated)",
            highlight=False,
        )
    counts = written["counts"]
    provider_errors = sum(s.reason == "provider_error" for s in states)
    err.print(
        f"{label}: {summary.attempted} calls made ({summary.failed} failed at the provider); items: "
        + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        + (f" ({provider_errors} for provider errors: rerun with --retry-failed)" if provider_errors else "")
        + f". Benchmark: {run.run_dir / 'benchmark'}",
        highlight=False,
    )
    return {"summary": summary, "counts": counts, "provider_errors": provider_errors}


def _check_structured(mode: str) -> None:
    from bench_core.generation.prompts import STRUCTURED_MODES

    if mode != "auto" and mode not in STRUCTURED_MODES:
        fail(f"unknown --structured {mode!r}; expected auto, {', '.join(STRUCTURED_MODES)}")


def _report(directory: Path, console: Console, *, write: bool = True) -> dict[str, Any]:
    from bench_core.generation.report import REPORT_DIR, construction_report, write_construction_report

    report = construction_report(directory)
    print_construction_report(report, console)
    if write:
        written = write_folder(directory / REPORT_DIR, partial(write_construction_report, report))
        console.print(f"wrote {', '.join(str(p) for p in written)}", highlight=False)
    return report


# Options shared by every command that calls a generator (typer reads them per command).
MODEL = typer.Option(..., "--model", help="Generator model id sent to the endpoint.")
BASE_URL = typer.Option(..., "--base-url", help="OpenAI-compatible base URL, e.g. http://host:8000/v1.")
SEED = typer.Option(DEFAULT_SEED, "--seed", help="Seed of the provenance draw / subset selection.")
MAX_ATTEMPTS = typer.Option(3, "--max-attempts", min=1, help="Validation attempts per stage.")
STRUCTURED = typer.Option("auto", "--structured", help="auto|json_schema|json_object|none.")
RETRY_FAILED = typer.Option(False, "--retry-failed", help="Call again the keys whose calls failed.")
CONCURRENCY = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint.")
TEMPERATURE = typer.Option(None, "--temperature", callback=non_negative)
MAX_TOKENS = typer.Option(None, "--max-tokens", min=1)
REASONING_EFFORT = typer.Option(None, "--reasoning-effort")
API_KEY_ENV = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key.")
PROVIDER = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google.")
TIMEOUT = typer.Option(300.0, "--timeout", callback=positive, help="Seconds allowed for one attempt.")
CALL_ATTEMPTS = typer.Option(6, "--call-attempts", min=1, help="Attempts per call on provider errors.")
MAX_TOTAL = typer.Option(900.0, "--max-total", callback=positive, help="Seconds allowed for all attempts of one call.")
BACKOFF = typer.Option(
    1.0, "--backoff", callback=non_negative, help="First retry wait in seconds (doubles per attempt)."
)
MAX_TOKENS_PARAM = typer.Option("max_tokens", "--max-tokens-param", help="max_tokens|max_completion_tokens")
PROGRESS = typer.Option(True, "--progress/--no-progress")


def generate(
    source: Path = typer.Option(..., "--source", help="Source dataset file or folder."),
    fmt: str = typer.Option(..., "--format", help="medqa|medmcqa|medxpertqa|medjourney|hle|medrev"),
    model: str = MODEL,
    base_url: str = BASE_URL,
    out: Path = typer.Option(..., "--out", help="Generation directory (created; reruns resume in it)."),
    seed: int = SEED,
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
    max_attempts: int = MAX_ATTEMPTS,
    structured: str = STRUCTURED,
    retry_failed: bool = RETRY_FAILED,
    concurrency: int = CONCURRENCY,
    temperature: float | None = TEMPERATURE,
    max_tokens: int | None = MAX_TOKENS,
    reasoning_effort: str | None = REASONING_EFFORT,
    api_key_env: str | None = API_KEY_ENV,
    provider: str = PROVIDER,
    timeout: float = TIMEOUT,
    call_attempts: int = CALL_ATTEMPTS,
    max_total: float = MAX_TOTAL,
    backoff: float = BACKOFF,
    max_tokens_param: str = MAX_TOKENS_PARAM,
    progress: bool = PROGRESS,
    batch: bool = BATCH,
    batch_size: int | None = BATCH_SIZE,
    batch_fallback: str = BATCH_FALLBACK,
    poll_interval: float = POLL_INTERVAL,
    price_file: Path | None = PRICE_FILE,
) -> None:
    """Build a MedMisBench-style benchmark from a multiple-choice QA set with an LLM generator."""
    check_endpoint(provider, base_url)  # every argument is checked before anything is written
    batching = BatchOptions(batch, batch_size, batch_fallback, poll_interval, price_file, progress)
    batching.check()
    from bench_core.generation.pipeline import (
        GenerationDirError,
        GenerationRun,
        GenerationSettings,
        append_manifest,
        check_generator,
        register_items,
        save_source_report,
    )
    from bench_core.generation.sources import SOURCE_FORMATS, load_source
    from bench_core.kernel.errors import DatasetError

    if fmt not in SOURCE_FORMATS:
        fail(f"unknown --format {fmt!r}; expected one of {', '.join(SOURCE_FORMATS)}")
    _check_structured(structured)
    try:
        settings = GenerationSettings(
            mode="one_call" if one_call else "two_stage",
            seed=seed,
            provenance_sampling=provenance,
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            max_attempts=max_attempts,
        )
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
    endpoint = _Endpoint(
        provider=provider,
        model_name=model,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        max_tokens_param=max_tokens_param,
        call_attempts=call_attempts,
        max_total=max_total,
        backoff=backoff,
        timeout=timeout,
        progress=progress,
        batch=batching,
    )
    try:
        chat_model = endpoint.model()
        check_generator(out, chat_model, settings)
        registered = register_items(out, items)
        run = GenerationRun(out, registered, settings, chat_model, structured=structured)
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
            "provider": provider,
            "endpoint": chat_model.endpoint,
            "settings": settings.as_dict(),
            "config_hash": settings.config_hash,
            "max_attempts": max_attempts,
            "structured": run.structured,
            "api_key_env": api_key_env,
            "concurrency": concurrency,
            "batch": batch,
            "limit": limit,
            "n_loaded": len(loaded.items),
            "n_items": len(registered),
            "source_dropped_by_reason": loaded.counts(),
        },
    )
    result = _execute(run, endpoint, retry_failed=retry_failed, label=model)
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


def _sensitivity(kind: str, from_: Path, out: Path, per_subset: str | None, size: int | None, **options: Any) -> None:
    """Select the stratified subset, write the reference, regenerate every variant, compare the bundles."""
    from bench_core.generation.pipeline import (
        GenerationDirError,
        GenerationRun,
        GenerationSettings,
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

    check_endpoint(options["provider"], options["base_url"])  # every argument is checked before anything is written
    seed = options.pop("seed")
    _check_structured(options["structured"])
    try:
        items = load_benchmark(from_)
        quotas = parse_quotas(per_subset)
        selected = stratified_subset(items, seed=seed, per_subset=quotas or None, size=size)
        if not selected:
            fail(f"no item with a usable bundle in {from_}")
        plan = prepare(
            out, selected, kind=kind, source=str(from_), seed=seed, quotas={"per_subset": quotas, "size": size}
        )
        settings = GenerationSettings(
            mode="fixed",
            seed=seed,
            temperature=options["temperature"],
            max_tokens=options["max_tokens"],
            reasoning_effort=options["reasoning_effort"],
            max_attempts=options["max_attempts"],
        )
    except (DatasetError, SensitivityError, ValueError) as exc:
        fail(str(exc))
    err.print(
        f"{plan['n_selected']} item(s) selected ("
        + ", ".join(f"{k} {v}" for k, v in plan["selected_by_subset"].items())
        + f"); reference benchmark: {out / 'reference' / 'benchmark'}",
        highlight=False,
    )
    endpoint = _Endpoint(model_name=options["model"], **{k: options[k] for k in _ENDPOINT_KEYS})
    provider_errors = 0
    for variant in plan["variants"]:
        directory = out / variant
        try:
            chat_model = endpoint.model()
            check_generator(directory, chat_model, settings)
            registered = register_items(directory, selected)
            run = GenerationRun(
                directory,
                registered,
                settings,
                chat_model,
                plans=plans_for(registered, variant),
                structured=options["structured"],
            )
        except (GenerationDirError, SensitivityError, ValueError, ImportError) as exc:
            fail(str(exc))
        append_manifest(
            directory,
            {
                "command": kind,
                "variant": variant,
                "from": str(from_),
                "model": options["model"],
                "provider": options["provider"],
                "endpoint": chat_model.endpoint,
                "settings": settings.as_dict(),
                "config_hash": settings.config_hash,
                "max_attempts": settings.max_attempts,
                "structured": run.structured,
                "api_key_env": options["api_key_env"],
                "n_items": len(registered),
            },
        )
        provider_errors += _execute(run, endpoint, retry_failed=options["retry_failed"], label=variant)[
            "provider_errors"
        ]
    _print_comparison(out)
    names = ", ".join(["reference", *plan["variants"]])
    err.print(
        f"Benchmarks to evaluate ({names}): {out}/<name>/benchmark; run each with the same "
        "medrev bench run medmisbench --seed, then compare with medrev bench compare-runs.",
        highlight=False,
    )
    if provider_errors:
        raise typer.Exit(1)


_ENDPOINT_KEYS = (
    "provider",
    "base_url",
    "api_key_env",
    "concurrency",
    "max_tokens_param",
    "call_attempts",
    "max_total",
    "backoff",
    "timeout",
    "progress",
)


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

    def command(
        from_: Path = FROM,
        model: str = MODEL,
        base_url: str = BASE_URL,
        out: Path = SENSITIVITY_OUT,
        per_subset: str | None = PER_SUBSET,
        size: int | None = SIZE,
        seed: int = SEED,
        max_attempts: int = MAX_ATTEMPTS,
        structured: str = STRUCTURED,
        retry_failed: bool = RETRY_FAILED,
        concurrency: int = CONCURRENCY,
        temperature: float | None = TEMPERATURE,
        max_tokens: int | None = MAX_TOKENS,
        reasoning_effort: str | None = REASONING_EFFORT,
        api_key_env: str | None = API_KEY_ENV,
        provider: str = PROVIDER,
        timeout: float = TIMEOUT,
        call_attempts: int = CALL_ATTEMPTS,
        max_total: float = MAX_TOTAL,
        backoff: float = BACKOFF,
        max_tokens_param: str = MAX_TOKENS_PARAM,
        progress: bool = PROGRESS,
    ) -> None:
        options = {k: v for k, v in locals().items() if k not in ("from_", "out", "per_subset", "size", "kind")}
        _sensitivity(kind, from_, out, per_subset, size, **options)

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


def register(app: typer.Typer) -> None:
    """Add the benchmark-building commands to the ``bench`` group."""
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
