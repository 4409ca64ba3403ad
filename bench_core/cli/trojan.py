"""``bench run trojan`` (two-stage evaluation), ``bench ingest trojan`` (validate a file, record provenance),
and the Trojan terminal report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from bench_core.cli.batch import BatchOptions
from bench_core.cli.common import (
    BACKOFF,
    CALL_TIMEOUT,
    MAX_TOTAL,
    RETRY_FAILED,
    check_endpoint,
    err,
    fail,
    finish_run,
    make_runner,
    non_negative,
    retry_policy,
    run_to_end,
    table,
)
from bench_core.cli.option_groups import takes
from bench_core.kernel.errors import DatasetError
from bench_core.kernel.rundir import write_atomic

ingest_app = typer.Typer(help="Validate benchmark source files and record their provenance.", no_args_is_help=True)


def _isimpact(value: str | None) -> bool | None:
    if value is None:
        return None
    from bench_core.trojan.data import parse_isimpact

    parsed = parse_isimpact(value)
    if parsed is None:
        fail(f"--default-isimpact must be yes or no, got {value!r}")
    return parsed


@ingest_app.command("trojan")
def ingest_trojan(
    data: Path = typer.Option(
        ..., "--data", help="standardized_analysis_ccversion.json, or a foreign file with --fallback."
    ),
    out: Path = typer.Option(..., "--out", help="Where to write the validated records with provenance (JSON)."),
    source_url: str | None = typer.Option(None, "--source-url", help="Where the file was downloaded from."),
    retrieved_at: str | None = typer.Option(None, "--retrieved-at", help="When it was downloaded (ISO 8601)."),
    expect_count: int | None = typer.Option(None, "--expect-count", help="Refuse the file unless it has N records."),
    fallback: str | None = typer.Option(
        None,
        "--fallback",
        help="Normalise records from another source (name it, e.g. retraction-watch) into the schema.",
    ),
    default_isimpact: str | None = typer.Option(None, "--default-isimpact", help="--fallback: yes/no when absent."),
    problem_from_conclusion: bool = typer.Option(
        False, "--problem-from-conclusion", help="--fallback: use the conclusion as the statement when none is given."
    ),
) -> None:
    """Validate a retracted-paper benchmark file and write it with its provenance (source, time, SHA-256, count)."""
    from bench_core.trojan.data import load_retracted, normalized_dataset

    try:
        if fallback:
            dataset = normalized_dataset(
                data,
                source=fallback,
                source_url=source_url,
                retrieved_at=retrieved_at,
                default_isimpact=_isimpact(default_isimpact),
                problem_from_conclusion=problem_from_conclusion,
            )
            if expect_count is not None and len(dataset.records) != expect_count:
                fail(f"{data}: {len(dataset.records)} records, expected {expect_count}")
        else:
            dataset = load_retracted(
                data, source_url=source_url, retrieved_at=retrieved_at, expected_count=expect_count
            )
    except DatasetError as exc:
        fail(str(exc))
    if out.is_dir():
        fail(f"{out}: --out is a folder, expected the path of the records file to write")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, [json.dumps(dataset.to_json(), indent=2, ensure_ascii=False) + "\n"])  # never half-written
    p = dataset.provenance
    err.print(
        f"{p.item_count} records, sha256 {p.sha256}, retrieved {p.retrieved_at} ({p.retrieved_at_source}); wrote {out}",
        highlight=False,
    )


@takes(BatchOptions, "batching")
def run_trojan(
    data: Path = typer.Option(
        ..., "--data", help="standardized_analysis_ccversion.json (or an ingested records file)."
    ),
    model: str = typer.Option(..., "--model", help="Target model id."),
    base_url: str = typer.Option(..., "--base-url", help="OpenAI-compatible base URL of the target model."),
    judge_model: str = typer.Option(..., "--judge-model", help="The fixed judge model id."),
    out: Path = typer.Option(..., "--out", help="Run directory (created; reruns resume in it)."),
    judge_base_url: str | None = typer.Option(None, "--judge-base-url", help="Judge endpoint (default: --base-url)."),
    source_url: str | None = typer.Option(None, "--source-url", help="Where the data file was downloaded from."),
    retrieved_at: str | None = typer.Option(None, "--retrieved-at", help="When it was downloaded (ISO 8601)."),
    expect_count: int | None = typer.Option(None, "--expect-count", help="Refuse the file unless it has N records."),
    skip_bad_rows: bool = typer.Option(
        False, "--skip-bad-rows", help="Run the valid records of a file with faulty ones, naming each one skipped."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N records."),
    judge_attempts: int = typer.Option(3, "--judge-attempts", min=1, help="Judge calls per answer, re-asks included."),
    temperature: float | None = typer.Option(0.0, "--temperature", callback=non_negative),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort"),
    judge_temperature: float | None = typer.Option(0.0, "--judge-temperature", callback=non_negative),
    judge_max_tokens: int | None = typer.Option(None, "--judge-max-tokens", min=1),
    judge_reasoning_effort: str | None = typer.Option(None, "--judge-reasoning-effort"),
    provider: str = typer.Option(
        "openai", "--provider", help="Target: openai (any compatible server), anthropic, google."
    ),
    judge_provider: str = typer.Option("openai", "--judge-provider"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Env var holding the target's API key."),
    judge_api_key_env: str | None = typer.Option(None, "--judge-api-key-env", help="Env var holding the judge's key."),
    label: str | None = typer.Option(None, "--label", help="Name shown in reports (default: the model id)."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint."),
    timeout: float = CALL_TIMEOUT,
    max_attempts: int = typer.Option(6, "--max-attempts", min=1, help="Attempts per call on HTTP/connection errors."),
    max_total: float = MAX_TOTAL,
    backoff: float = BACKOFF,
    retry_failed: bool = RETRY_FAILED,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    *,
    batching: BatchOptions,
) -> None:
    """Two-stage retracted-paper contamination run: the model answers, a fixed judge scores (1, 0, -1)."""
    check_endpoint(provider, base_url)  # every argument is checked before anything is written
    check_endpoint(judge_provider, judge_base_url)
    batching.check()
    from bench_core.kernel.providers import make_chat_model
    from bench_core.kernel.store import ResultStore
    from bench_core.trojan.data import load_retracted
    from bench_core.trojan.prompts import DEFAULT_PROMPTS, get_prompts
    from bench_core.trojan.run import (
        RunDirError,
        StageSettings,
        Target,
        append_run_manifest,
        run_two_stages,
        write_records,
    )

    try:
        dataset = load_retracted(
            data,
            source_url=source_url,
            retrieved_at=retrieved_at,
            expected_count=expect_count,
            skip_bad_rows=skip_bad_rows,
        )
    except DatasetError as exc:
        fail(str(exc))
    for issue in dataset.issues:
        err.print(f"not loaded: {issue}", highlight=False)
    if limit:
        dataset.records = dataset.records[:limit]
    prompts = get_prompts(DEFAULT_PROMPTS)
    target_settings = StageSettings(prompts.id, temperature, max_tokens, reasoning_effort)
    judge_settings = StageSettings(prompts.id, judge_temperature, judge_max_tokens, judge_reasoning_effort)
    try:
        target_model = make_chat_model(
            provider, model, base_url=base_url, api_key_env=api_key_env, connections=concurrency
        )
        judge = make_chat_model(
            judge_provider,
            judge_model,
            base_url=judge_base_url or base_url,
            api_key_env=judge_api_key_env,
            connections=concurrency,
        )
        write_records(out, dataset)  # after every check: a refused run writes nothing
    except (RunDirError, ValueError, ImportError) as exc:
        fail(str(exc))
    target = Target(target_model, target_settings, label or model)
    store = ResultStore(out)  # a damaged results file is refused before the manifest grows
    append_run_manifest(
        out,
        {
            "data": str(data),
            "provenance": dataset.provenance.model_dump(),
            "model": model,
            "label": target.label,
            "provider": provider,
            "endpoint": target_model.endpoint,
            "settings": target_settings.as_dict(),
            "config_hash": target_settings.config_hash,
            "judge_model": judge_model,
            "judge_provider": judge_provider,
            "judge_endpoint": judge.endpoint,
            "judge_settings": judge_settings.as_dict(),
            "judge_attempts": judge_attempts,
            "prompts": prompts.id,
            "api_key_env": api_key_env,
            "judge_api_key_env": judge_api_key_env,
            "batch": batching.batch,
            "limit": limit,
            "n_records": len(dataset.records),
        },
    )
    retry = retry_policy(max_attempts, max_total, backoff)
    runner = make_runner(
        store, concurrency=concurrency, timeout=timeout, progress=progress, retry=retry, batch=batching
    )
    summary = run_to_end(
        lambda: run_two_stages(
            runner,
            dataset.records,
            target,
            judge,
            judge_settings,
            prompts,
            judge_attempts=judge_attempts,
            retry_failed=retry_failed,
        ),
        store,
        [target_model, judge],
        runner,
    )
    judged = sum(r.succeeded for r in summary.judge_rounds)
    from bench_core.trojan.run import write_run_traces

    traces = write_run_traces(out)
    err.print(f"per-item traces (question, answer, judge prompt, verdict, label): {traces}", highlight=False)
    finish_run(
        store,
        f"answers: {summary.stage_a.succeeded} new, {summary.stage_a.already_done} already done, "
        f"{summary.stage_a.failed} failed; judge calls: {judged} new in {len(summary.judge_rounds)} round(s), "
        f"{sum(r.failed for r in summary.judge_rounds)} failed. Results: {store.path}",
        failed=summary.failed,
        batch=batching,
    )


def print_report(report: dict[str, Any], console: Console) -> None:
    """The seed's results table (total = judged items N; flagged and failed items are outside N)."""
    from bench_core.trojan.report import HEADER, results_rows

    console.rule(f"Retracted-paper contamination: {report.get('run_dir', '')}")
    provenance = report.get("provenance") or {}
    source = provenance.get("source_url") or provenance.get("dataset_url") or "(not given)"
    checksum = str(provenance.get("sha256") or provenance.get("file_checksum") or "–")
    console.print(
        f"{report['n_records']} record(s); source {source}, sha256 {checksum[:16]}…",
        highlight=False,
    )
    results = table(None, HEADER, no_wrap=True)
    for row in results_rows(report):
        results.add_row(*row)
    console.print(results)
    judges = sorted({j for m in report["models"].values() for j in m["judge_models"]})
    console.print(f"judge: {', '.join(judges) or '(none yet)'}", highlight=False)
