"""``bench run medmisbench`` (optionally with the search tools of ``mitigation``) and its terminal report."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from bench_core.cli.batch import BatchOptions, refuse_with
from bench_core.cli.common import (
    BACKOFF,
    CALL_TIMEOUT,
    MAX_ATTEMPTS,
    MAX_TOTAL,
    RETRY_FAILED,
    check_endpoint,
    check_tools,
    err,
    fail,
    finish_run,
    make_runner,
    non_negative,
    pct_ci,
    positive,
    retry_policy,
    run_to_end,
    table,
)
from bench_core.cli.option_groups import takes
from bench_core.kernel.errors import DatasetError
from bench_core.kernel.report_files import pct
from bench_core.medmisbench.targets import DEFAULT_SEED

HARNESS_PANEL = "Tool harness (search mitigation)"
SEARCH_INDEX_FILE = "search_index.sqlite"


def _harness(default: Any, flag: str, **settings: Any) -> Any:
    """An option of the tool harness: listed in its own ``--help`` panel, apart from the evaluation's."""
    return typer.Option(default, flag, rich_help_panel=HARNESS_PANEL, **settings)


@takes(BatchOptions, "batching")
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
    strict: bool = typer.Option(
        False, "--strict", help="Refuse the data if any row cannot be loaded (the default; kept for old scripts)."
    ),
    skip_bad_rows: bool = typer.Option(
        False, "--skip-bad-rows", help="Load the good rows of a file with bad ones, naming each row skipped."
    ),
    retry_failed: bool = RETRY_FAILED,
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        callback=non_negative,
        help="Sampling temperature (default: the template's; medmisbench-authors@1 sends the notebook's 1.0, "
        "the paper's text says 0).",
    ),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Token cap (default: the template's)."),
    reasoning_effort: str | None = typer.Option(
        None, "--reasoning-effort", help="e.g. none, minimal, low, medium, high (default: the template's)."
    ),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Name of the env var holding the API key (default per provider)."
    ),
    provider: str = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google."),
    label: str | None = typer.Option(None, "--label", help="Name shown in reports (default: the model id)."),
    template: str | None = typer.Option(
        None, "--template", help="Delivery template id (name@version; default medmisbench-authors@1)."
    ),
    template_file: Path | None = typer.Option(
        None, "--template-file", help="JSON file of extra templates; its first is used unless --template names one."
    ),
    protocol: str = typer.Option(
        "authors",
        "--protocol",
        help="authors: the notebook's row reading, accounting and answer reading; strict: medrev's rules.",
    ),
    request_profile: str = typer.Option(
        "auto",
        "--request-profile",
        help="Request settings to use: auto (from provider, URL and model), openai, openai-reasoning, "
        "openai-compatible, anthropic, google.",
    ),
    thinking: str = typer.Option(
        "auto",
        "--thinking",
        help="OpenAI-compatible servers: chat_template_kwargs enable_thinking on|off (Qwen3, GLM); "
        "auto: the template's rule.",
    ),
    timeout: float = CALL_TIMEOUT,
    max_attempts: int = MAX_ATTEMPTS,
    max_total: float = MAX_TOTAL,
    backoff: float = BACKOFF,
    max_tokens_param: str | None = typer.Option(
        None, "--max-tokens-param", help="max_tokens|max_completion_tokens (default: the template's, else max_tokens)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    tools: str | None = _harness(
        None,
        "--tools",
        help="Let the model search and read before answering: local:DIR (BM25 over a folder of documents) or "
        "web (Serper + Jina Reader; SERPER_API_KEY, JINA_API_KEY).",
    ),
    max_tool_calls: int = _harness(8, "--max-tool-calls", min=1, help="Tool calls allowed per item."),
    max_page_tokens: int = _harness(2000, "--max-page-tokens", min=1, help="Approximate tokens of a page shown."),
    max_results: int = _harness(5, "--max-results", min=1, help="Results per search."),
    time_budget: float = _harness(
        600.0, "--time-budget", callback=positive, help="Seconds allowed per item (all turns)."
    ),
    tool_timeout: float = _harness(
        60.0, "--tool-timeout", callback=positive, help="Seconds allowed per search or page."
    ),
    harness_prompt: str | None = _harness(None, "--harness-prompt", help="Harness prompt id (name@version)."),
    *,
    batching: BatchOptions,
) -> None:
    """Evaluate one model on MedMisBench under clean / Type 1 / Type 2 delivery (optionally with search tools)."""
    check_endpoint(provider, base_url)  # every argument is checked before anything is written
    check_tools(tools)
    batching.check()
    if batching.batch and tools is not None:
        refuse_with("--tools", "a tool loop needs each answer before it can make its next call")
    from bench_core.kernel.providers import make_chat_model
    from bench_core.kernel.runner import RetryPolicy
    from bench_core.kernel.store import ResultStore
    from bench_core.medmisbench.conditions import parse_conditions
    from bench_core.medmisbench.data import load_medmisbench
    from bench_core.medmisbench.items import reading_for
    from bench_core.medmisbench.prompts import (
        DEFAULT_TEMPLATE_ID,
        check_profile,
        get_template,
        load_template_file,
        resolve_request,
    )
    from bench_core.medmisbench.prompts import request_profile as profile_of
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
        reading = reading_for(protocol)
        loaded = load_template_file(template_file) if template_file is not None else {}
        delivery = get_template(template or (next(iter(loaded)) if loaded else DEFAULT_TEMPLATE_ID), loaded)
        profile = profile_of(provider, base_url, model) if request_profile == "auto" else request_profile
        check_profile(provider, profile)
        request = resolve_request(
            delivery,
            profile,
            model,
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            thinking=thinking,
            max_tokens_param=max_tokens_param,
        )
    except ValueError as exc:
        fail(str(exc))
    try:
        report = load_medmisbench(data, strict=strict or not skip_bad_rows, reading=reading)
    except DatasetError as exc:
        fail(str(exc))
    for issue in report.issues:
        err.print(f"not loaded: {issue}", highlight=False)
    for warning in report.warnings:
        err.print(f"note: {warning}", highlight=False)
    items = report.items[:limit] if limit else report.items
    if not items:
        fail(f"no item could be loaded from {data}")
    prepared = prepare_items(items, seed=seed)
    settings = EvalSettings.of(request, template_id=delivery.id, seed=seed, protocol=protocol)
    harness = None
    try:
        chat_model = make_chat_model(
            provider,
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            connections=concurrency,
            max_tokens_param=max_tokens_param or "max_tokens",
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
            step_retry = retry_policy(max_attempts, max_total, backoff)
            harness = ToolHarness(chat_model, backend, harness_settings, step_retry=step_retry)
        write_items(out, prepared, seed)  # after every check: a refused run writes nothing
    except (RunDirError, ValueError, ImportError) as exc:
        fail(str(exc))
    harness_manifest = {}
    if harness is not None:
        from bench_core.mitigation.harness import harness_config_hash

        harness_manifest = {
            "tools": tools,
            "harness": harness.settings.as_dict(),
            "evidence": harness.evidence,
            "config_hash": harness_config_hash(settings, harness.settings, harness.evidence),
        }
    store = ResultStore(out)  # a damaged results file is refused before the manifest grows
    append_run_manifest(
        out,
        {
            "data": str(data),
            "model": model,
            "label": label or model,
            "provider": provider,
            "endpoint": chat_model.endpoint,
            "conditions": [c.name for c in chosen],
            "template": delivery.id,
            "template_definition": asdict(delivery) if template_file is not None else None,
            "protocol": protocol,
            "request_profile": request.profile or profile,
            "request_settings": settings.request_fields(),
            "settings": settings.as_dict(),
            "config_hash": settings.config_hash,
            "api_key_env": api_key_env,
            "concurrency": concurrency,
            "batch": batching.batch,
            "limit": limit,
            "n_items": len(prepared),
            "n_skipped": sum(p.skipped is not None for p in prepared),
            "load_issues": [str(issue) for issue in report.issues],
            **harness_manifest,
        },
    )
    if harness is None:
        jobs = build_jobs(prepared, chosen, chat_model, delivery, settings, label=label)
        retry = retry_policy(max_attempts, max_total, backoff)
        runner = make_runner(
            store, concurrency=concurrency, timeout=timeout, progress=progress, retry=retry, batch=batching
        )
    else:
        from bench_core.mitigation.harness import build_harness_jobs

        jobs = build_harness_jobs(prepared, chosen, harness, delivery, settings, label=label)
        # One attempt per item: the harness retries each model call itself, and retrying a whole item
        # would repeat its searches. The item's own time budget bounds it; the margin lets it report.
        retry = RetryPolicy(max_attempts=1)
        runner = make_runner(store, concurrency=concurrency, timeout=time_budget + 30, progress=progress, retry=retry)
    summary = run_to_end(
        lambda: runner.run(jobs, retry_failed=retry_failed, description=f"{label or model}"),
        store,
        [harness or chat_model],
        runner,
    )
    skipped = [p for p in prepared if p.skipped is not None]
    finish_run(
        store,
        f"{summary.succeeded} calls succeeded, {summary.failed} failed, {summary.already_done} already done, "
        f"{summary.skipped_failed} earlier failures not retried (use --retry-failed); "
        f"{len(skipped)} item(s) skipped (unusable bundle). Results: {store.path}",
        failed=summary.failed,
        batch=batching,
    )


def describe_run(model: dict[str, Any]) -> str:
    """One line naming a model's template, protocol and request settings (what makes numbers comparable)."""
    request = model.get("request") or {}
    shown = ", ".join(f"{key} {_short(value)}" for key, value in request.items() if value is not None)
    protocol = model.get("protocol", "strict")
    failed = "failed calls count as wrong" if protocol == "authors" else "failed calls left out of n"
    return f"{model.get('model')}: template {model.get('template')}, protocol {protocol} ({failed}); {shown}"


def _short(value: Any) -> str:
    """A setting as a few words: response formats by their type, nested settings compactly."""
    if isinstance(value, dict):
        if "type" in value and len(value) <= 2:
            return str(value["type"])
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return f"[{len(value)} entries]"
    return str(value)


def print_report(report: dict[str, Any], console: Console) -> None:
    """Readable tables: per model and condition, the mean across models, and Type 1 ASR by stratum."""
    console.rule(f"MedMisBench: {report.get('run_dir', '')}")
    console.print(
        f"{report['n_evaluable']} evaluable item(s) of {report['n_items']}; {len(report['skipped'])} skipped. "
        "Rates in %, Wilson 95% CI in brackets.",
        highlight=False,
    )
    for name, model in report["models"].items():
        console.print(describe_run(model), highlight=False)
        columns = ("condition", "n", "accuracy", "ASR", "TASR", "ΔASR def.", "unparseable", "failed")
        overall = table(f"{name}: overall (pooled over subsets)", columns, no_wrap=True)
        for condition, block in model["conditions"].items():
            overall.add_row(
                condition,
                str(block["n"]),
                pct_ci(block, "accuracy"),
                pct_ci(block, "asr"),
                pct_ci(block, "tasr"),
                pct(block.get("asr_delta")) if "asr_delta" in block else "",
                str(block["n_unparseable"]),
                str(block["n_failed"]),
            )
        console.print(overall)
    if len(report["models"]) > 1:
        mean = Table(title="Mean across models")
        for column in ("condition", "accuracy", "ASR", "TASR"):
            mean.add_column(column)
        for condition, block in report["mean"]["conditions"].items():
            mean.add_row(condition, pct(block.get("accuracy")), pct(block.get("asr")), pct(block.get("tasr")))
        console.print(mean)
    for stratum in ("subset", "provenance", "content"):
        strata = Table(title=f"Type 1 / Type 2 ASR by {stratum}")
        strata.add_column(stratum)
        for name in report["models"]:
            strata.add_column(f"{name} T1")
            strata.add_column(f"{name} T2")
        values = sorted({v for m in report["models"].values() for v in m["strata"][stratum]})
        for value in values:
            row = [value]
            for model in report["models"].values():
                blocks = model["strata"][stratum].get(value, {})
                row += [pct_ci(blocks.get("type1", {}), "asr"), pct_ci(blocks.get("type2", {}), "asr")]
            strata.add_row(*row)
        console.print(strata)
    if report["skipped"]:
        skipped = ", ".join(f"{s['item_id']} ({s['reason']})" for s in report["skipped"])
        console.print(f"Skipped: {skipped}", highlight=False)


def print_combined(report: dict[str, Any], console: Console) -> None:
    """The paper's main tables over several run directories: per metric, a row per model and a Mean row,
    a column per subset and Overall (pooled counts); then each model's template, protocol and request."""
    from bench_core.medmisbench.report import main_tables

    console.rule(f"MedMisBench: {len(report['run_dirs'])} run directories ({len(report['models'])} models)")
    console.print(
        f"Protocol {report['protocol']}. Rates in %; Overall pools numerators and denominators over subsets, "
        "Mean is the arithmetic mean over models (the paper's Tables 12-14).",
        highlight=False,
    )
    for table_data in main_tables(report).values():
        out = table(table_data["title"], table_data["header"], no_wrap=True)
        for row in table_data["rows"]:
            out.add_row(str(row[0]), *(pct(value) for value in row[1:]), style="bold" if row[0] == "Mean" else None)
        console.print(out)
    for name, model in report["models"].items():
        console.print(f"{name} ({report['model_run_dir'][name]}): {describe_run(model)}", highlight=False)
