"""The generator endpoint: what ``generate``, ``regenerate`` and ``reassign-provenance`` share.

Their options (``GeneratorOptions``, an option group: ``cli.option_groups``) with the generator and
runner they describe, and the run of a ``GenerationRun`` to its end with its one-line account. The
runner's retry options are the evaluation commands' own (``cli.common``), so a generation run
retries and resumes as an evaluation run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from bench_core.cli.common import (
    BACKOFF,
    CALL_TIMEOUT,
    MAX_TOTAL,
    RETRY_FAILED,
    err,
    fail,
    make_runner,
    non_negative,
    retry_policy,
    run_to_end,
)
from bench_core.medmisbench.targets import DEFAULT_SEED

if TYPE_CHECKING:
    from bench_core.cli.batch import BatchOptions
    from bench_core.generation.item_state import GenerationSettings

MODEL = typer.Option(..., "--model", help="Generator model id sent to the endpoint.")
BASE_URL = typer.Option(..., "--base-url", help="OpenAI-compatible base URL, e.g. http://host:8000/v1.")
SEED = typer.Option(DEFAULT_SEED, "--seed", help="Seed of the provenance draw / subset selection.")


@dataclass(frozen=True)
class GeneratorOptions:
    """The generator's request, validation and runner options, in the order every generator command lists them.

    ``--max-attempts`` counts validation attempts here, so the runner's attempts per call have their own
    flag, ``--call-attempts``.
    """

    max_attempts: int = typer.Option(3, "--max-attempts", min=1, help="Validation attempts per stage.")
    structured: str = typer.Option("auto", "--structured", help="auto|json_schema|json_object|none.")
    retry_failed: bool = RETRY_FAILED
    concurrency: int = typer.Option(8, "--concurrency", min=1, help="Concurrent calls per endpoint.")
    temperature: float | None = typer.Option(None, "--temperature", callback=non_negative)
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1)
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort")
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Name of the env var holding the API key.")
    provider: str = typer.Option("openai", "--provider", help="openai (any compatible server), anthropic, google.")
    timeout: float = CALL_TIMEOUT
    call_attempts: int = typer.Option(6, "--call-attempts", min=1, help="Attempts per call on provider errors.")
    max_total: float = MAX_TOTAL
    backoff: float = BACKOFF
    max_tokens_param: str = typer.Option("max_tokens", "--max-tokens-param", help="max_tokens|max_completion_tokens")
    progress: bool = typer.Option(True, "--progress/--no-progress")

    def chat_model(self, model: str, base_url: str) -> Any:
        """The generator: ``model`` at ``base_url``, through these options' provider, key and connections."""
        from bench_core.kernel.providers import make_chat_model

        return make_chat_model(
            self.provider,
            model,
            base_url=base_url,
            api_key_env=self.api_key_env,
            connections=self.concurrency,
            max_tokens_param=self.max_tokens_param,
        )

    def runner(self, store: Any, batch: BatchOptions | None = None) -> Any:
        """The runner of the generator's calls (with ``batch``'s ``--batch``: through the batch API)."""
        return make_runner(
            store,
            concurrency=self.concurrency,
            timeout=self.timeout,
            progress=self.progress,
            retry=retry_policy(self.call_attempts, self.max_total, self.backoff),
            batch=batch,
        )

    def settings(self, mode: str, seed: int, **more: Any) -> GenerationSettings:
        """The generation settings of a run in ``mode`` (``ValueError`` for a setting they refuse)."""
        from bench_core.generation.item_state import GenerationSettings

        return GenerationSettings(
            mode=mode,
            seed=seed,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            reasoning_effort=self.reasoning_effort,
            max_attempts=self.max_attempts,
            **more,
        )


def run_generation(
    run: Any, options: GeneratorOptions, *, label: str, batch: BatchOptions | None = None
) -> dict[str, Any]:
    """Run a ``GenerationRun`` to completion (Ctrl-C: exit 130 with a resume hint), then write its outputs."""
    from bench_core.generation.pipeline import write_outputs

    runner = options.runner(run.store, batch)

    summary = run_to_end(lambda: run.run(runner, retry_failed=options.retry_failed), run.store, [run.model], runner)
    states = run.states()
    written = write_outputs(run, states)
    run.close()
    if batch is not None:
        batch.report(run.run_dir)
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
