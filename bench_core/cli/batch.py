"""``--batch`` for every command that calls models, and ``bench batch status|cancel``.

The run commands share the options below, gathered in ``BatchOptions`` (an option group,
``cli.option_groups``) and carried to ``common.make_runner``, which then returns a ``BatchRunner``
instead of a ``Runner``. What is shown while a batch run works (the plan and its cost estimate before
submitting, the progress while waiting, the usage and cost afterwards) is printed here: the kernel
only reports data.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench_core.cli.common import ReportConsole, err, fail, positive, table

if TYPE_CHECKING:
    from bench_core.kernel.batch_runner import BatchPlan, BatchProgress, BatchRunner
    from bench_core.kernel.pricing import PriceTable
    from bench_core.kernel.runner import Runner

PANEL = "Batch APIs (about half price, answers within 24 h)"
BATCH = typer.Option(
    False,
    "--batch",
    help="Send the calls through the provider's batch API (OpenAI and compatible servers, Anthropic, Google): "
    "about half the price, answers within 24 h. Rerun the same command to resume; nothing is sent twice.",
    rich_help_panel=PANEL,
)
BATCH_SIZE = typer.Option(
    None, "--batch-size", min=1, help="Requests per batch (default: the provider's limit).", rich_help_panel=PANEL
)
BATCH_FALLBACK = typer.Option(
    "batch",
    "--batch-fallback",
    help="Requests a batch did not return (expired, errored, refused): batch (the next batch) or sync (called "
    "one by one).",
    rich_help_panel=PANEL,
)
POLL_INTERVAL = typer.Option(
    30.0, "--poll-interval", callback=positive, help="Seconds between status checks of batches.", rich_help_panel=PANEL
)
PRICE_FILE = typer.Option(
    None,
    "--price-file",
    help="TOML of USD per million tokens per model (example: bench_core/kernel/providers/prices.example.toml): "
    "cost before submitting and after.",
    rich_help_panel=PANEL,
)


@dataclass(frozen=True)
class BatchOptions:
    """The batch options of one command, checked (``check``) before anything is written.

    Its fields are the options themselves (``option_groups``): a run command takes them all with
    ``@takes(BatchOptions, "batching")``; one whose ``--batch-size`` serves another purpose too
    (``run healthcontradict``) declares the flags itself and builds its ``BatchOptions`` from them.
    """

    batch: bool = BATCH
    batch_size: int | None = BATCH_SIZE
    batch_fallback: str = BATCH_FALLBACK
    poll_interval: float = POLL_INTERVAL
    price_file: Path | None = PRICE_FILE

    def check(self) -> PriceTable | None:
        """Refuse a bad ``--batch-fallback`` or price file now; the prices, when a file is given."""
        from bench_core.kernel.batch_runner import FALLBACKS

        if self.batch_fallback not in FALLBACKS:
            fail(f"--batch-fallback: expected one of {', '.join(FALLBACKS)}, found {self.batch_fallback!r}")
        return load_price_file(self.price_file)

    def wrap(self, runner: Runner) -> Runner | BatchRunner:
        """``runner`` itself without ``--batch``; with it, a ``BatchRunner`` that falls back on ``runner``."""
        if not self.batch:
            return runner
        from bench_core.kernel.batch_runner import BatchRunner

        return BatchRunner(
            runner.store,
            sync=runner,
            retry=runner.retry,
            batch_size=self.batch_size,
            fallback=self.batch_fallback,
            poll_interval=self.poll_interval,
            timeout=runner.timeout,
            reporter=BatchConsole(self.check(), progress=runner.progress),
        )

    def report(self, run_dir: Path) -> None:
        """After a ``--batch`` run: the usage and cost of the directory's calls, synchronous and batch."""
        if self.batch:
            print_usage(run_dir, self.check())


def load_price_file(path: Path | None) -> PriceTable | None:
    if path is None:
        return None
    from bench_core.kernel.pricing import PriceFileError, load_prices

    try:
        return load_prices(path)
    except PriceFileError as exc:
        fail(str(exc))


def refuse_with(option: str, reason: str) -> None:
    """``--batch`` together with an option it cannot serve (a tool loop, a local model)."""
    fail(f"--batch cannot be used with {option}: {reason}")


def usd(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:,.2f}" if value >= 0.995 or value == 0 else f"${value:,.4f}"


def tokens(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f}M"
    if value >= 10_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:,}"


class BatchConsole:
    """The ``BatchReporter`` of the command line: the plan, a progress line while waiting, and notes (stderr)."""

    def __init__(self, prices: PriceTable | None = None, *, progress: bool = True, console: Console | None = None):
        self.prices = prices
        self.show_progress = progress
        self.console = console or err
        self._progress: Progress | None = None
        self._task: Any = None

    def plan(self, plan: BatchPlan) -> None:
        resumed = f"; {plan.resumed} batch(es) of an earlier run to collect" if plan.resumed else ""
        self.console.print(
            f"batch: {plan.description}: {plan.requests:,} request(s) in {plan.batches} batch(es), about "
            f"{tokens(plan.input_tokens)} input tokens (estimated, 4 characters a token){resumed}"
        )
        for model, estimate in plan.models.items():
            line = f"  {model} ({estimate.provider}): {estimate.requests:,} request(s)"
            line += f", ~{tokens(estimate.input_tokens)} input tokens"
            price = self.prices.price(model) if self.prices is not None else None
            if price is not None:
                sync_in = price.cost(estimate.input_tokens, 0, batch=False)
                batch_in = price.cost(estimate.input_tokens, 0, batch=True)
                line += f"; input {usd(sync_in)} synchronous, {usd(batch_in)} batch"
                if estimate.max_output_tokens:
                    cap = estimate.max_output_tokens
                    line += (
                        f"; output at most {tokens(cap)} tokens: at most {usd(price.cost(0, cap, batch=False))} "
                        f"synchronous, {usd(price.cost(0, cap, batch=True))} batch"
                    )
                else:
                    line += f"; output ${price.output:g}/M synchronous, ${price.batch_output:g}/M batch"
            elif self.prices is not None:
                line += f"; no price for this model in {self.prices.source}"
            self.console.print(line)
        if self.prices is not None:
            self.console.print(f"  prices: {self.prices.source} (as of {self.prices.as_of or 'unknown date'})")

    def progress(self, progress: BatchProgress) -> None:
        if not self.show_progress:
            return
        fields = {"submitted": progress.submitted, "running": progress.in_progress, "ended": progress.completed}
        if self._progress is None:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "requests; batches: {task.fields[submitted]} submitted, {task.fields[running]} in "
                    "progress, {task.fields[ended]} completed; waited"
                ),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(_plain(progress.description), total=progress.requests, **fields)
        self._progress.update(self._task, total=progress.requests, completed=progress.done, **fields)

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"note: {message}")
        else:
            self.console.print(f"note: {message}")

    def done(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _plain(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_usage(run_dir: Path, prices: PriceTable | None, console: Console | None = None) -> dict[str, Any]:
    """The usage providers returned for the run's calls and their cost, synchronous and batch side by side."""
    from bench_core.kernel.pricing import run_usage

    usage = run_usage(run_dir, prices)
    print_usage_table(usage, console or ReportConsole(stderr=True))
    return usage


def print_usage_table(usage: dict[str, Any], console: Console) -> None:
    if not usage["total"]["requests"]:
        return
    priced = usage.get("prices") is not None
    columns = ["calls", "requests", "input tok", "output tok", "reasoning tok"]
    if priced:
        columns += ["cost", "the other way"]
    rows = table("Usage the providers returned, and cost (USD)", columns, no_wrap=True)
    for via, label in (("batch", "batch"), ("sync", "synchronous"), ("total", "total")):
        block = usage[via]
        if via != "total" and not block["requests"]:
            continue
        cells = [
            label,
            f"{block['requests']:,}",
            tokens(block["input_tokens"]),
            tokens(block["output_tokens"]),
            tokens(block["reasoning_tokens"]),
        ]
        if priced:
            cells += [usd(block["cost_usd"]), usd(block["cost_usd_other_way"])]
        rows.add_row(*cells)
    console.print(rows)
    if priced:
        prices = usage["prices"]
        note = f"prices: {prices['file']} (as of {prices['as_of'] or 'unknown date'}); 'the other way': the same calls "
        note += "at the synchronous price for batch rows, at the batch price for synchronous ones"
        console.print(note)
        if usage["unpriced"]:
            console.print(f"not priced (not in the price file, left out of costs): {', '.join(usage['unpriced'])}")


# -- bench batch status / cancel ------------------------------------------------------------------

batch_app = typer.Typer(help="See and cancel the provider batches of a run directory.", no_args_is_help=True)


def _journal(run_dir: Path):
    from bench_core.kernel.batch_journal import BatchJournal

    if not run_dir.is_dir():
        fail(f"{run_dir}: no such run directory")
    journal = BatchJournal(run_dir)
    if not journal.exists():
        fail(f"{run_dir}: no batches here (no batches.jsonl; runs with --batch write it)")
    try:
        return journal, journal.state()
    except ValueError as exc:
        fail(str(exc))


def _api_key_env(run_dir: Path, endpoint: str, given: str | None) -> str | None:
    """The env var named for ``endpoint`` by the run's manifests (never a key itself), unless one is given."""
    if given:
        return given
    from bench_core.kernel.rundir import RUNS_FILE, read_jsonl

    for manifest in reversed(read_jsonl(run_dir / RUNS_FILE)):
        if manifest.get("endpoint") == endpoint and manifest.get("api_key_env"):
            return str(manifest["api_key_env"])
        if manifest.get("judge_endpoint") == endpoint and manifest.get("judge_api_key_env"):
            return str(manifest["judge_api_key_env"])
    return None


def _apis(run_dir: Path, entries: list[Any], api_key_env: str | None) -> tuple[dict[tuple[str, str, str], Any], list]:
    """A batch adapter per (provider, endpoint, model) of ``entries``; models to close afterwards."""
    from bench_core.kernel.providers import make_batch_api, make_chat_model

    apis: dict[tuple[str, str, str], Any] = {}
    models = []
    for entry in entries:
        ident = (entry.provider, entry.endpoint, entry.model)
        if ident in apis:
            continue
        try:
            model = make_chat_model(
                entry.provider,
                entry.model,
                base_url=entry.endpoint,
                api_key_env=_api_key_env(run_dir, entry.endpoint, api_key_env),
            )
        except (ValueError, ImportError) as exc:
            err.print(f"note: {entry.provider} {entry.endpoint}: {exc}; showing the journal's last known state")
            apis[ident] = None
            continue
        models.append(model)
        apis[ident] = make_batch_api(model)
    return apis, models


def batch_status(
    run_dir: Path = typer.Argument(..., help="A run directory made with --batch."),
    refresh: bool = typer.Option(
        True, "--refresh/--offline", help="Ask the provider for the current state of open batches."
    ),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Env var of the API key (default: the run's, else the provider's)."
    ),
    price_file: Path | None = PRICE_FILE,
    as_json: bool = typer.Option(False, "--json", help="Print the batches and usage as JSON."),
) -> None:
    """Each batch of a run directory: state, request counts, what was collected; usage and cost so far."""
    import asyncio

    _journal_file, state = _journal(run_dir)
    prices = load_price_file(price_file)
    entries = sorted(state.entries.values(), key=lambda e: e.planned_at)
    live: dict[str, Any] = {}
    open_entries = [e for e in entries if e.open and e.batch_id and not e.downloaded]
    if refresh and open_entries:
        apis, models = _apis(run_dir, open_entries, api_key_env)

        async def ask() -> None:
            try:
                for entry in open_entries:
                    api = apis.get((entry.provider, entry.endpoint, entry.model))
                    if api is None:
                        continue
                    try:
                        live[entry.id] = await api.status(entry.batch_id)
                    except Exception as exc:  # shown, not fatal: the journal still says what is known
                        err.print(f"note: batch {entry.batch_id}: {type(exc).__name__}: {exc}")
            finally:
                for model in models:
                    await model.aclose()

        asyncio.run(ask())
    rows = []
    for entry in entries:
        status = live.get(entry.id)
        handled = list(entry.handled.values())
        rows.append(
            {
                "entry": entry.id,
                "batch_id": entry.batch_id,
                "provider": entry.provider,
                "model": entry.model,
                "description": entry.description,
                "planned_at": entry.planned_at.isoformat(timespec="seconds"),
                "requests": len(entry.keys),
                "state": status.state if status is not None else (entry.state or entry.phase),
                "counts": dict(status.counts) if status is not None else dict(entry.counts),
                "phase": entry.phase,
                "ok": handled.count("ok"),
                "failed": handled.count("failed"),
                "retried": handled.count("retry"),
                "cancel_requested": entry.cancel_requested,
                "refused": entry.refused,
            }
        )
    from bench_core.kernel.pricing import run_usage

    usage = run_usage(run_dir, prices)
    if as_json:
        sys.stdout.write(json.dumps({"run_dir": str(run_dir), "batches": rows, "usage": usage}) + "\n")
        return
    console = ReportConsole()
    shown = table(
        f"Batches of {run_dir}",
        ("batch", "model", "requests", "state", "stage", "ok/failed/retried"),
        left={"batch", "model", "state", "stage"},
    )
    for row in rows:
        counts = ", ".join(f"{k} {v}" for k, v in row["counts"].items() if v)
        stage = row["phase"] + (" (cancel asked)" if row["cancel_requested"] else "")
        shown.add_row(
            row["batch_id"] or f"({row['entry']})",
            row["model"],
            f"{row['requests']:,}",
            row["state"] + (f": {counts}" if counts else ""),
            stage,
            f"{row['ok']}/{row['failed']}/{row['retried']}",
        )
    console.print(shown)
    running = sum(1 for row in rows if row["phase"] in ("submitted", "ended", "downloaded"))
    console.print(
        f"{len(rows)} batch(es): {running} not collected yet (run the same bench command again to collect them), "
        f"{sum(r['phase'] == 'collected' for r in rows)} collected."
    )
    print_usage_table(usage, console)


def batch_cancel(
    run_dir: Path = typer.Argument(..., help="A run directory made with --batch."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Env var of the API key (default: the run's, else the provider's)."
    ),
) -> None:
    """Cancel the run directory's batches at the provider (a run waiting on them stops at its next check)."""
    import asyncio

    journal, state = _journal(run_dir)
    open_entries = [e for e in state.entries.values() if e.open and e.batch_id and not e.downloaded]
    journal.append("cancel_requested", None)
    if not open_entries:
        err.print(f"{run_dir}: no batch is running (nothing to cancel)")
        return
    apis, models = _apis(run_dir, open_entries, api_key_env)
    failures = 0

    async def cancel() -> None:
        nonlocal failures
        try:
            for entry in open_entries:
                api = apis.get((entry.provider, entry.endpoint, entry.model))
                if api is None:
                    failures += 1
                    continue
                try:
                    await api.cancel(entry.batch_id)
                except Exception as exc:
                    failures += 1
                    err.print(f"batch {entry.batch_id}: not cancelled ({type(exc).__name__}: {exc})")
                    continue
                journal.append("cancel_requested", entry.id, batch_id=entry.batch_id)
                err.print(f"batch {entry.batch_id} ({entry.model}, {len(entry.keys)} requests): cancel requested")
        finally:
            for model in models:
                await model.aclose()

    asyncio.run(cancel())
    err.print(
        "Answers the provider finished before the cancel are collected by the next run of the same command; "
        "the other requests are submitted again then."
    )
    if failures:
        raise typer.Exit(1)


batch_app.command("status")(batch_status)
batch_app.command("cancel")(batch_cancel)
