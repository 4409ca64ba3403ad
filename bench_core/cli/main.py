"""The ``bench`` command group: run benchmarks against model endpoints and report their metrics.

Mounted as ``medrev bench`` by ``review_app.cli``; also runnable as ``python -m bench_core``.
Flags and JSON keys follow SPEC section 3 (add, never rename).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import typer
from rich.console import Console

from bench_core.cli.generation import register as register_generation
from bench_core.cli.healthcontradict import run_healthcontradict
from bench_core.cli.trojan import ingest_app, run_trojan
from bench_core.kernel.errors import DatasetError
from bench_core.medmisbench.conditions import parse_conditions
from bench_core.medmisbench.targets import DEFAULT_SEED

app = typer.Typer(help="Run benchmarks against model endpoints and report their metrics.", no_args_is_help=True)
run_app = typer.Typer(help="Evaluate a model on a benchmark.", no_args_is_help=True)
app.add_typer(run_app, name="run")
register_generation(app)  # generate, generate-report, regenerate, reassign-provenance, compare-runs

err = Console(stderr=True)
HARNESS_PANEL = "Tool harness (search mitigation)"
SEARCH_INDEX_FILE = "search_index.sqlite"


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    raise typer.Exit(code)


@run_app.command("medmisbench")
def run_medmisbench(
    data: Path = typer.Option(..., "--data", help="Released-format file or folder of subset files."),
    model: str = typer.Option(..., "--model", help="Model id sent to the endpoint."),
    base_url: str = typer.Option(..., "--base-url", help="OpenAI-compatible base URL, e.g. http://host:8000/v1."),
    out: Path = typer.Option(..., "--out", help="Run directory (created; reruns resume in it)."),
    conditions: str = typer.Option("clean,type1,type2", "--conditions", help="Comma list of conditions."),
    defensive: bool = typer.Option(False, "--defensive", help="Also run the defensive variant of each condition."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="Seed of the Type 1 target draw."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N items."),
    strict: bool = typer.Option(False, "--strict", help="Refuse the data if any row cannot be loaded."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Call again the keys whose calls failed."),
    temperature: float | None = typer.Option(0.0, "--temperature"),
    max_tokens: int | None = typer.Option(None, "--max-tokens"),
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort", help="e.g. none, low, medium, high."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Name of the env var holding the API key (default per provider)."
    ),
    provider: str = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google."),
    label: str | None = typer.Option(None, "--label", help="Name shown in reports (default: the model id)."),
    template: str | None = typer.Option(None, "--template", help="Delivery prompt template id (name@version)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds allowed for one attempt."),
    max_attempts: int = typer.Option(6, "--max-attempts", min=1),
    max_total: float = typer.Option(900.0, "--max-total", help="Seconds allowed for all attempts of one call."),
    backoff: float = typer.Option(1.0, "--backoff", help="First retry wait in seconds (doubles per attempt)."),
    max_tokens_param: str = typer.Option("max_tokens", "--max-tokens-param", help="max_tokens|max_completion_tokens"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    tools: str | None = typer.Option(
        None,
        "--tools",
        help="Let the model search and read before answering: local:DIR (BM25 over a folder of documents) or "
        "web (Serper + Jina Reader; SERPER_API_KEY, JINA_API_KEY).",
        rich_help_panel=HARNESS_PANEL,
    ),
    max_tool_calls: int = typer.Option(
        8, "--max-tool-calls", min=1, help="Tool calls allowed per item.", rich_help_panel=HARNESS_PANEL
    ),
    max_page_tokens: int = typer.Option(
        2000, "--max-page-tokens", min=1, help="Approximate tokens of a page shown.", rich_help_panel=HARNESS_PANEL
    ),
    max_results: int = typer.Option(
        5, "--max-results", min=1, help="Results per search.", rich_help_panel=HARNESS_PANEL
    ),
    time_budget: float = typer.Option(
        600.0, "--time-budget", help="Seconds allowed per item (all turns).", rich_help_panel=HARNESS_PANEL
    ),
    tool_timeout: float = typer.Option(
        60.0, "--tool-timeout", help="Seconds allowed per search or page.", rich_help_panel=HARNESS_PANEL
    ),
    harness_prompt: str | None = typer.Option(
        None, "--harness-prompt", help="Harness prompt id (name@version).", rich_help_panel=HARNESS_PANEL
    ),
) -> None:
    """Evaluate one model on MedMisBench under clean / Type 1 / Type 2 delivery (optionally with search tools)."""
    from bench_core.kernel.providers import make_chat_model
    from bench_core.kernel.runner import RetryPolicy, Runner
    from bench_core.kernel.store import ResultStore
    from bench_core.medmisbench.data import load_medmisbench
    from bench_core.medmisbench.prompts import DEFAULT_TEMPLATE_ID, get_template
    from bench_core.medmisbench.run import (
        EvalSettings,
        RunDirError,
        append_run_manifest,
        build_jobs,
        prepare_items,
        write_items,
    )

    try:
        chosen = parse_conditions(conditions, defensive=defensive)
        delivery = get_template(template or DEFAULT_TEMPLATE_ID)
    except ValueError as exc:
        _fail(str(exc))
    try:
        report = load_medmisbench(data, strict=strict)
    except DatasetError as exc:
        _fail(str(exc))
    for issue in report.issues:
        err.print(f"[yellow]not loaded:[/] {issue}", highlight=False)
    items = report.items[:limit] if limit else report.items
    if not items:
        _fail(f"no item could be loaded from {data}")
    prepared = prepare_items(items, seed=seed)
    settings = EvalSettings(
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning_effort=reasoning_effort,
        template_id=delivery.id,
        seed=seed,
    )
    harness = None
    try:
        write_items(out, prepared, seed)
        chat_model = make_chat_model(
            provider,
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            connections=concurrency,
            max_tokens_param=max_tokens_param,
        )
        if tools is not None:
            from bench_core.mitigation.harness import HarnessSettings, ToolHarness
            from bench_core.mitigation.prompts import DEFAULT_PROMPT_ID as HARNESS_PROMPT_ID
            from bench_core.mitigation.search import make_backend

            harness_settings = HarnessSettings(
                max_tool_calls=max_tool_calls,
                max_page_tokens=max_page_tokens,
                max_results=max_results,
                prompt_id=harness_prompt or HARNESS_PROMPT_ID,
                time_budget=time_budget,
                tool_timeout=tool_timeout,
                call_timeout=timeout,
            )
            backend = make_backend(tools, index_path=out / SEARCH_INDEX_FILE, timeout=tool_timeout)
            step_retry = RetryPolicy(max_attempts=max_attempts, max_total=max_total, base_delay=backoff)
            harness = ToolHarness(chat_model, backend, harness_settings, step_retry=step_retry)
    except (RunDirError, ValueError, ImportError, OSError) as exc:
        _fail(str(exc))
    harness_manifest = {}
    if harness is not None:
        from bench_core.mitigation.harness import harness_config_hash

        harness_manifest = {
            "tools": tools,
            "harness": harness.settings.as_dict(),
            "evidence": harness.evidence,
            "config_hash": harness_config_hash(settings, harness.settings, harness.evidence),
        }
    append_run_manifest(
        out,
        {
            "data": str(data),
            "model": model,
            "label": label or model,
            "provider": provider,
            "endpoint": chat_model.endpoint,
            "conditions": [c.name for c in chosen],
            "settings": settings.as_dict(),
            "config_hash": settings.config_hash,
            "api_key_env": api_key_env,
            "concurrency": concurrency,
            "limit": limit,
            "n_items": len(prepared),
            "n_skipped": sum(p.skipped is not None for p in prepared),
            "load_issues": [str(issue) for issue in report.issues],
            **harness_manifest,
        },
    )
    store = ResultStore(out)
    if harness is None:
        jobs = build_jobs(prepared, chosen, chat_model, delivery, settings, label=label)
        runner = Runner(
            store,
            concurrency=concurrency,
            retry=RetryPolicy(max_attempts=max_attempts, max_total=max_total, base_delay=backoff),
            timeout=timeout,
            progress=progress,
            console=err,
        )
    else:
        from bench_core.mitigation.harness import build_harness_jobs

        jobs = build_harness_jobs(prepared, chosen, harness, delivery, settings, label=label)
        # One attempt per item: the harness retries each model call itself, and retrying a whole item
        # would repeat its searches. The item's own time budget bounds it; the margin lets it report.
        runner = Runner(
            store,
            concurrency=concurrency,
            retry=RetryPolicy(max_attempts=1),
            timeout=time_budget + 30,
            progress=progress,
            console=err,
        )
    closer = harness or chat_model

    async def main() -> object:
        try:
            return await runner.run(jobs, retry_failed=retry_failed, description=f"{label or model}")
        finally:
            await closer.aclose()

    try:
        summary = asyncio.run(main())
    except KeyboardInterrupt:
        store.close()
        err.print(
            f"[yellow]interrupted:[/] finished calls are saved in {store.path}; "
            "run the same command again to resume (no finished call is repeated)."
        )
        raise typer.Exit(130) from None
    store.close()
    skipped = [p for p in prepared if p.skipped is not None]
    err.print(
        f"{summary.succeeded} calls succeeded, {summary.failed} failed, {summary.already_done} already done, "
        f"{summary.skipped_failed} earlier failures not retried (use --retry-failed); "
        f"{len(skipped)} item(s) skipped (unusable bundle). Results: {store.path}",
        highlight=False,
    )
    if summary.failed:
        raise typer.Exit(1)


run_app.command("healthcontradict")(run_healthcontradict)
run_app.command("trojan")(run_trojan)
app.add_typer(ingest_app, name="ingest")


@app.command("report")
def report(
    directory: Path = typer.Argument(..., help="A run directory, or a folder of run directories."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (one object per run directory)."),
    out: Path | None = typer.Option(None, "--out", help="Where to write tables and figures (default DIR/report)."),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="Write Plotly figures (HTML and PNG)."),
    png: bool = typer.Option(True, "--png/--no-png", help="Also render figures to PNG (needs Chromium)."),
) -> None:
    """Metrics of run directories (any benchmark): terminal tables, or JSON with --json; files under DIR/report."""
    from bench_core.cli.designs import find_run_dirs

    if not directory.exists():
        _fail(f"{directory}: no such directory")
    run_dirs = find_run_dirs(directory)
    if not run_dirs:
        _fail(
            f"{directory} is not a run directory and holds none (expected runs.jsonl beside items.jsonl, "
            "instances.jsonl or records.json)"
        )
    console = Console()
    for run_dir, design in run_dirs:
        try:
            result = design.build(run_dir)
        except ValueError as exc:  # every design's RunDirError, and DatasetError, is a ValueError
            _fail(str(exc))
        result["run_dir"] = str(run_dir)
        if as_json:
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
            continue
        design.print_report(result, console)
        target = out if out is not None and len(run_dirs) == 1 else (out or run_dir / "report")
        if out is not None and len(run_dirs) > 1:
            target = out / run_dir.name
        written = design.write_report(result, target, figures=figures, png=png)
        console.print(f"wrote {len(written)} files to {target}")


@app.command("compare")
def compare(
    with_dir: Path = typer.Argument(..., help="Run directory of the tool-harness run (bench run medmisbench --tools)."),
    without_dir: Path = typer.Argument(..., help="Run directory of the same model without tools (may be the same)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as one JSON object."),
    out: Path | None = typer.Option(
        None, "--out", help="Where to write tables and figures (default WITH_DIR/compare)."
    ),
    with_label: str | None = typer.Option(None, "--with-label", help="Which with-tools run (label, model or config)."),
    without_label: str | None = typer.Option(None, "--without-label", help="Which run without tools."),
    figures: bool = typer.Option(True, "--figures/--no-figures", help="Write Plotly figures (HTML and PNG)."),
    png: bool = typer.Option(True, "--png/--no-png", help="Also render figures to PNG (needs Chromium)."),
) -> None:
    """Search mitigation: accuracy, ASR and TASR with vs without tools on the same items, tool use, flips."""
    from bench_core.mitigation.metrics import ComparisonError, compare_runs
    from bench_core.mitigation.report import print_comparison, write_comparison

    for directory in (with_dir, without_dir):
        if not directory.is_dir():
            _fail(f"{directory}: no such directory")
    try:
        result = compare_runs(with_dir, without_dir, with_label=with_label, without_label=without_label)
    except ComparisonError as exc:
        _fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    console = Console()
    print_comparison(result, console)
    target = out or with_dir / "compare"
    written = write_comparison(result, target, figures=figures, png=png)
    console.print(f"wrote {len(written)} files to {target}")


if __name__ == "__main__":
    app()
