"""``bench run healthcontradict`` (an API model with ``--base-url`` or a local Hugging Face model with ``--hf``),
and the HealthContradict terminal report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from bench_core.cli.batch import BATCH, BATCH_FALLBACK, POLL_INTERVAL, PRICE_FILE, BatchOptions, refuse_with
from bench_core.cli.common import (
    BACKOFF,
    MAX_ATTEMPTS,
    MAX_TOTAL,
    RETRY_FAILED,
    check_endpoint,
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
from bench_core.kernel.errors import DatasetError
from bench_core.kernel.report_files import p_value, pct


def run_healthcontradict(
    data: Path = typer.Option(
        ...,
        "--data",
        help="Prepared instances file, or a folder laid out like the public repo (query list, documents).",
    ),
    model: str = typer.Option(..., "--model", help="Model id sent to the endpoint (or the name recorded for --hf)."),
    out: Path = typer.Option(..., "--out", help="Run directory (created; reruns resume in it)."),
    base_url: str | None = typer.Option(None, "--base-url", help="OpenAI-compatible base URL (API scoring)."),
    hf: Path | None = typer.Option(None, "--hf", help="Local Hugging Face model folder (next-token logit scoring)."),
    templates: str = typer.Option("NC,CC,IC,CIC,ICC", "--templates", help="Comma list of prompt templates."),
    queries: Path | None = typer.Option(None, "--queries", help="Query list (query-all.jsonl) when not in --data."),
    documents: Path | None = typer.Option(
        None, "--documents", help="Document table (topic_id, doc_id, stance, text) when not in --data."
    ),
    pairs: Path | None = typer.Option(None, "--pairs", help="Pair list (doc-contradict.csv); else pair with the seed."),
    seed: int = typer.Option(42, "--seed", help="Pairing seed base (the authors': 42, plus the topic id)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Only the first N instances."),
    label_tokens: str = typer.Option("variants", "--label-tokens", help="--hf: variants (default) or original."),
    batch_size: int | None = typer.Option(
        None,
        "--batch-size",
        min=1,
        help="--hf: prompts per forward pass (default 4); --batch: requests per provider batch (default: the "
        "provider's limit).",
    ),
    max_batch_tokens: int | None = typer.Option(
        None, "--max-batch-tokens", min=1, help="--hf: cap on padded tokens per pass."
    ),
    device: str = typer.Option("auto", "--device", help="--hf: auto, cpu, cuda, cuda:1 ..."),
    dtype: str = typer.Option("auto", "--dtype", help="--hf: auto (fp16 on GPU, fp32 on CPU), float32, bfloat16 ..."),
    chat_template: bool = typer.Option(False, "--chat-template", help="--hf: wrap prompts in the chat template."),
    max_context_tokens: int | None = typer.Option(
        None,
        "--max-context-tokens",
        min=1,
        help="Context window for truncation (--hf: default the model's; API: words).",
    ),
    logprobs: bool = typer.Option(True, "--logprobs/--no-logprobs", help="API: ask for top logprobs of the answer."),
    top_logprobs: int = typer.Option(20, "--top-logprobs", min=1, max=20),
    temperature: float | None = typer.Option(0.0, "--temperature", callback=non_negative),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key."),
    provider: str = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google."),
    label: str | None = typer.Option(None, "--label", help="Name shown in reports (default: the model id)."),
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint (API)."),
    timeout: float | None = typer.Option(
        None, "--timeout", callback=positive, help="Seconds for one call (default 300; --hf 3600)."
    ),
    max_attempts: int = MAX_ATTEMPTS,
    max_total: float = MAX_TOTAL,
    backoff: float = BACKOFF,
    retry_failed: bool = RETRY_FAILED,
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    batch: bool = BATCH,
    batch_fallback: str = BATCH_FALLBACK,
    poll_interval: float = POLL_INTERVAL,
    price_file: Path | None = PRICE_FILE,
) -> None:
    """Evaluate one model on HealthContradict under the NC, CC, IC, CIC and ICC templates."""
    if hf is None:
        check_endpoint(provider, base_url)  # every argument is checked before anything is written
    batching = BatchOptions(batch, batch_size if batch else None, batch_fallback, poll_interval, price_file)
    batching.check()
    if batch and hf is not None:
        refuse_with("--hf", "a local model is scored in this process; there is no provider batch to send")
    from bench_core.healthcontradict.data import load_healthcontradict
    from bench_core.healthcontradict.prompts import DEFAULT_TEMPLATE_SET, get_template_set, parse_templates
    from bench_core.healthcontradict.run import (
        HCSettings,
        RunDirError,
        TokenizerCounter,
        WordCounter,
        append_run_manifest,
        build_jobs,
        write_instances,
    )
    from bench_core.kernel.store import ResultStore

    if (base_url is None) == (hf is None):
        fail("give exactly one of --base-url URL (API model) or --hf MODEL_DIR (local model)")
    try:
        chosen = parse_templates(templates)
        template_set = get_template_set(DEFAULT_TEMPLATE_SET)
    except ValueError as exc:
        fail(str(exc))
    try:
        dataset = load_healthcontradict(
            data, queries=queries, documents=documents, pairs=pairs, seed=seed, need_documents=chosen != ["NC"]
        )
    except DatasetError as exc:
        fail(str(exc))
    instances = dataset.instances[:limit] if limit else dataset.instances
    counter = None
    manifest_model: dict[str, object] = {}
    if hf is not None:
        from bench_core.healthcontradict.hf_logits import HFLogitModel

        try:
            chat_model = HFLogitModel(
                hf,
                name=model,
                label_mode=label_tokens,
                batch_size=batch_size or 4,
                max_batch_tokens=max_batch_tokens,
                max_context_tokens=max_context_tokens,
                device=device,
                dtype=dtype,
                chat_template=chat_template,
            )
        except (ImportError, ValueError) as exc:
            fail(str(exc))
        counter = TokenizerCounter(chat_model)
        settings = HCSettings(
            template_set=template_set.id,
            scorer="hf",
            temperature=None,
            logprobs=False,
            label_mode=label_tokens,
            max_context_tokens=chat_model.context_window,
            chat_template=chat_template,
        )
        per_endpoint = 2 * (batch_size or 4)  # one batch scoring while the next one queues
        manifest_model = {
            "provider": "hf",
            "model_dir": str(chat_model.model_dir),
            "label_tokens": chat_model.labels.as_dict(),
            "context_window": chat_model.context_window,
            "device": str(chat_model.device),
            "batch_size": batch_size or 4,
        }
    else:
        from bench_core.kernel.providers import make_chat_model

        try:
            chat_model = make_chat_model(
                provider, model, base_url=base_url, api_key_env=api_key_env, connections=concurrency
            )
        except (ValueError, ImportError) as exc:
            fail(str(exc))
        if max_context_tokens is not None:
            counter = WordCounter()
        settings = HCSettings(
            template_set=template_set.id,
            scorer="api",
            temperature=temperature,
            max_tokens=max_tokens,
            reasoning_effort=reasoning_effort,
            logprobs=logprobs,
            top_logprobs=top_logprobs,
            max_context_tokens=max_context_tokens,
        )
        per_endpoint = concurrency
        manifest_model = {"provider": provider, "api_key_env": api_key_env, "batch": batch}
    try:
        write_instances(out, instances)
    except RunDirError as exc:
        fail(str(exc))
    store = ResultStore(out)  # a damaged results file is refused before the manifest grows
    append_run_manifest(
        out,
        {
            "data": str(data),
            "data_files": dataset.files,
            "pairing": dataset.pairing,
            "model": model,
            "label": label or model,
            "endpoint": chat_model.endpoint,
            "templates": chosen,
            "template_set": template_set.id,
            "settings": settings.as_dict(),
            "config_hash": settings.config_hash,
            "token_counter": counter.name if counter is not None else None,
            "concurrency": per_endpoint,
            "limit": limit,
            "n_instances": len(instances),
            "n_topics": len({i.topic_id for i in instances}),
            **manifest_model,
        },
    )
    jobs = build_jobs(instances, chosen, chat_model, template_set, settings, counter=counter, label=label)
    if timeout is None:
        timeout = 3600.0 if hf is not None else 300.0
    retry = retry_policy(max_attempts, max_total, backoff)
    runner = make_runner(
        store, concurrency=per_endpoint, timeout=timeout, progress=progress, retry=retry, batch=batching
    )
    summary = run_to_end(
        lambda: runner.run(jobs, retry_failed=retry_failed, description=label or model), store, [chat_model], runner
    )
    finish_run(
        store,
        f"{summary.succeeded} calls succeeded, {summary.failed} failed, {summary.already_done} already done, "
        f"{summary.skipped_failed} earlier failures not retried (use --retry-failed). Results: {store.path}",
        failed=summary.failed,
        batch=batching,
    )


def _fixed(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def print_report(report: dict[str, Any], console: Console) -> None:
    """Per model: accuracy and macro-F1 by template, OR/VM, McNemar and agreement by template pair."""
    console.rule(f"HealthContradict: {report.get('run_dir', '')}")
    console.print(
        f"{report['n_instances']} instance(s) over {report['n_topics']} question(s). "
        "Rates in %, Wilson 95% CI in brackets; NC is asked once per question.",
        highlight=False,
    )
    for name, model in report["models"].items():
        columns = ("template", "n", "accuracy", "macro-F1", "unparseable", "failed", "truncated")
        rates = table(f"{name}", columns, no_wrap=True)
        for template, block in model["templates"].items():
            rates.add_row(
                template,
                str(block["n"]),
                pct_ci(block, "accuracy"),
                pct(block["macro_f1"]),
                str(block["n_unparseable"]),
                str(block["n_failed"]),
                str(block["n_truncated"]),
            )
        console.print(rates)
        console.print(
            f"OR = P(wrong under CC | wrong under NC): {pct_ci(model, 'or_rate')} [{model['or_k']}/{model['or_n']}]   "
            f"VM = P(wrong under IC | right under NC): {pct_ci(model, 'vm_rate')} [{model['vm_k']}/{model['vm_n']}]",
            highlight=False,
        )
        pairs = table(f"{name}: template pairs", ("pair", "b", "c", "McNemar χ²", "p", "agreement"))
        for pair, test in model["mcnemar"].items():
            pairs.add_row(
                pair,
                str(test["b"]),
                str(test["c"]),
                _fixed(test["chi2"]),
                p_value(test["p_value"]),
                pct(model["agreement"][pair]["rate"]),
            )
        console.print(pairs)
        quartiles = model.get("by_context_quartile") or {}
        if quartiles:
            by_length = table(
                f"{name}: by context-length quartile (macro-F1 %, accuracy % in brackets)",
                ("template", "Q1", "Q2", "Q3", "Q4", "n per quartile"),
                no_wrap=True,
            )
            for template, groups in quartiles.items():
                cells = [f"{pct(g['macro_f1'])} ({pct(g['accuracy'])})" for g in groups]
                by_length.add_row(template, *cells, " / ".join(str(g["n"]) for g in groups))
            console.print(by_length)
    if len(report["models"]) > 1:
        print_side_by_side(report, console)


def print_side_by_side(report: dict[str, Any], console: Console) -> None:
    """The paper's results table (accuracy and macro-F1 per template, every model side by side) and
    McNemar between models on each template."""
    templates = report["templates"]
    columns = ["model"] + [f"{t} {m}" for t in templates for m in ("Acc.", "F1")]
    side = table("Accuracy and macro-F1 (%) per template, models side by side (paper Table 5)", columns, no_wrap=True)
    for name, model in report["models"].items():
        cells = []
        for template in templates:
            block = model["templates"].get(template, {})
            cells += [pct(block.get("accuracy")), pct(block.get("macro_f1"))]
        side.add_row(name, *cells)
    console.print(side)
    tests = report.get("model_mcnemar") or {}
    if tests:
        pairs = table(
            "McNemar between models on the same template",
            ("template", "models", "acc. first", "acc. second", "b", "c", "χ²", "p"),
            left={"template", "models"},
        )
        for template, by_pair in tests.items():
            for pair, test in by_pair.items():
                pairs.add_row(
                    template,
                    pair,
                    pct(test["accuracy_first"]),
                    pct(test["accuracy_second"]),
                    str(test["b"]),
                    str(test["c"]),
                    _fixed(test["chi2"]),
                    p_value(test["p_value"]),
                )
        console.print(pairs)


def print_combined(report: dict[str, Any], console: Console) -> None:
    """Several run directories together: the side-by-side table, McNemar between models, Fig. 7 by model."""
    console.rule(f"HealthContradict: {len(report['run_dirs'])} run directories ({len(report['models'])} models)")
    console.print(
        f"{report['n_instances']} instance(s) over {report['n_topics']} question(s). Rates in %.", highlight=False
    )
    print_side_by_side(report, console)
    for name, model in report["models"].items():
        quartiles = model.get("by_context_quartile") or {}
        for template, groups in quartiles.items():
            cells = ", ".join(f"Q{g['quartile']} {pct(g['macro_f1'])}" for g in groups)
            console.print(f"{name} {template} macro-F1 by context quartile: {cells}", highlight=False)
