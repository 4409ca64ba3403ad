"""The generator endpoint: what ``generate``, ``regenerate`` and ``reassign-provenance`` share.

Their options (one object per flag; typer reads it afresh for each command that names it), the
endpoint those options describe, and the run of a ``GenerationRun`` to its end with its one-line
account. The runner's retry options are the evaluation commands' own (``cli.common``), so a
generation run retries and resumes as an evaluation run does.
"""

from __future__ import annotations

from typing import Any

import typer

from bench_core.cli.common import (
    err,
    fail,
    make_runner,
    non_negative,
    retry_policy,
    run_to_end,
)
from bench_core.medmisbench.targets import DEFAULT_SEED

MODEL = typer.Option(..., "--model", help="Generator model id sent to the endpoint.")
BASE_URL = typer.Option(..., "--base-url", help="OpenAI-compatible base URL, e.g. http://host:8000/v1.")
SEED = typer.Option(DEFAULT_SEED, "--seed", help="Seed of the provenance draw / subset selection.")
VALIDATION_ATTEMPTS = typer.Option(3, "--max-attempts", min=1, help="Validation attempts per stage.")
STRUCTURED = typer.Option("auto", "--structured", help="auto|json_schema|json_object|none.")
CONCURRENCY = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint.")
TEMPERATURE = typer.Option(None, "--temperature", callback=non_negative)
MAX_TOKENS = typer.Option(None, "--max-tokens", min=1)
REASONING_EFFORT = typer.Option(None, "--reasoning-effort")
API_KEY_ENV = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key.")
PROVIDER = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google.")
# ``--max-attempts`` counts validation attempts here, so the runner's attempts per call have their own flag.
CALL_ATTEMPTS = typer.Option(6, "--call-attempts", min=1, help="Attempts per call on provider errors.")
MAX_TOKENS_PARAM = typer.Option("max_tokens", "--max-tokens-param", help="max_tokens|max_completion_tokens")
PROGRESS = typer.Option(True, "--progress/--no-progress")


class GeneratorEndpoint:
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
        return make_runner(
            store,
            concurrency=self.concurrency,
            timeout=self.timeout,
            progress=self.progress,
            retry=retry_policy(self.call_attempts, self.max_total, self.backoff),
            batch=getattr(self, "batch", None),
        )


def run_generation(run, endpoint: GeneratorEndpoint, *, retry_failed: bool, label: str) -> dict[str, Any]:
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


def check_structured(mode: str) -> None:
    """Refuse an unknown ``--structured`` mode before anything is written."""
    from bench_core.generation.prompts import STRUCTURED_MODES

    if mode != "auto" and mode not in STRUCTURED_MODES:
        fail(f"unknown --structured {mode!r}; expected auto, {', '.join(STRUCTURED_MODES)}")
