"""What the ``bench`` commands share: error exit, stderr console, running to completion or Ctrl-C, rate cells."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Awaitable, Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from bench_core.cli.errors import fail as cli_fail
from bench_core.kernel.report_files import pct

if TYPE_CHECKING:  # the runner and the store are loaded by the commands that run, not by --help
    from bench_core.kernel.batch_runner import BatchRunner
    from bench_core.kernel.runner import RetryPolicy, Runner
    from bench_core.kernel.store import ResultStore

# user text (labels, file names) printed as is, long paths on one line
err = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
# The file that makes a directory one design's run directory (beside runs.jsonl), for refusing another's.
DESIGN_MARKERS = {
    "items.jsonl": "medmisbench",
    "instances.jsonl": "healthcontradict",
    "records.json": "trojan",
    "source_items.jsonl": "medmisbench-generation",
}


class _Started:
    """Whether the command being run has started its calls (from then on its directory holds paid work)."""

    value = False


def run_directory(benchmark: str, option: str = "out") -> Callable[[F], F]:
    """Guard the output directory of a run command (``--out``): one benchmark, one process, nothing half-made.

    Before the command runs: a directory holding another benchmark's run is refused, the directory is
    created and locked (``RunLock``: a second process is refused naming the first's PID, host and start
    time; the lock of a killed process is gone with it, so a resume can start at once). If the command is
    refused before its first call (bad data, bad arguments, an endpoint that cannot be set up), a directory
    it created is removed again: a refused run leaves nothing behind. The lock is released when the command
    ends, however it ends.
    """
    from bench_core.kernel.rundir import RUNS_FILE, RunLock, benchmarks_in, read_jsonl

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = Path(kwargs[option])
            if out.exists() and not out.is_dir():
                fail(f"{out}: --{option} is a file, expected a directory (new, or a {benchmark} run directory)")
            existed = out.exists()
            if existed:
                others = sorted(
                    ({DESIGN_MARKERS[name] for name in DESIGN_MARKERS if (out / name).exists()} | benchmarks_in(out))
                    - {benchmark}
                )
                if others:
                    fail(
                        f"{out} is a {', '.join(others)} run directory; a {benchmark} run needs its own "
                        "--out directory (results of two benchmarks in one directory would hide each other)."
                    )
                from bench_core.kernel.store import ResultStore

                try:  # damaged results or side files are refused before anything is added to them
                    ResultStore(out)
                    read_jsonl(out / RUNS_FILE)
                except ValueError as exc:
                    fail(str(exc))
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                from bench_core.kernel.errors import is_input_os_error, machine_fault

                if is_input_os_error(exc):
                    fail(f"{out}: cannot create the run directory ({exc.strerror})")
                raise machine_fault(exc, out, "create the run directory") from None
            lock = RunLock(out)
            try:
                lock.acquire()
            except ValueError as exc:
                if not existed:
                    shutil.rmtree(out, ignore_errors=True)
                fail(str(exc))
            _Started.value = False
            try:
                return func(*args, **kwargs)
            except BaseException as exc:
                refused = not (isinstance(exc, typer.Exit) and exc.exit_code == 0)
                if refused and not existed and not _Started.value:
                    lock.release()
                    shutil.rmtree(out, ignore_errors=True)
                raise
            finally:
                lock.release()
                _Started.value = False

        return wrapper  # type: ignore[return-value]

    return decorate


def positive(value: float | None) -> float | None:
    """Option callback: a number of seconds must be more than 0 (checked before anything is written)."""
    if value is not None and not value > 0:
        raise typer.BadParameter(f"expected a number > 0, found {value:g}")
    return value


def non_negative(value: float | None) -> float | None:
    """Option callback: a temperature or a wait cannot be negative."""
    if value is not None and not value >= 0:
        raise typer.BadParameter(f"expected a number >= 0, found {value:g}")
    return value


# The runner's retry options, with the same flags, defaults and help in every command that calls a model
# (typer reads an option object afresh for each command that names it, so one object serves them all).
CALL_TIMEOUT = typer.Option(300.0, "--timeout", callback=positive, help="Seconds allowed for one attempt.")
MAX_ATTEMPTS = typer.Option(6, "--max-attempts", min=1)
MAX_TOTAL = typer.Option(900.0, "--max-total", callback=positive, help="Seconds allowed for all attempts of one call.")
BACKOFF = typer.Option(
    1.0, "--backoff", callback=non_negative, help="First retry wait in seconds (doubles per attempt)."
)
RETRY_FAILED = typer.Option(False, "--retry-failed", help="Call again the keys whose calls failed.")


def retry_policy(max_attempts: int, max_total: float, backoff: float) -> RetryPolicy:
    """The runner's retry policy from the retry options (``--backoff`` is the first wait, doubled per attempt)."""
    from bench_core.kernel.runner import RetryPolicy

    return RetryPolicy(max_attempts=max_attempts, max_total=max_total, base_delay=backoff)


def check_endpoint(provider: str, base_url: str | None) -> None:
    """Refuse an unknown provider or a base URL that is not http(s)://host... before anything is written."""
    from urllib.parse import urlsplit

    from bench_core.kernel.providers import PROVIDERS

    if provider not in PROVIDERS:
        fail(f"--provider: expected one of {', '.join(PROVIDERS)}, found {provider!r}")
    if base_url is None:
        return
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or " " in base_url:
        fail(f"--base-url: expected an http(s) URL such as http://localhost:8000/v1, found {base_url!r}")


def check_tools(tools: str | None) -> None:
    """Refuse a --tools value that is neither ``web`` nor ``local:DIR`` with an existing folder."""
    if tools is None:
        return
    kind, _, argument = tools.partition(":")
    if kind == "web" and not argument:
        return
    if kind == "local" and argument:
        folder = Path(argument)
        if not folder.is_dir():
            fail(f"--tools: {folder}: not a folder of documents (local:DIR searches the documents of a folder)")
        return
    fail(f"--tools: unknown search backend {tools!r}; expected local:DIR or web")


def write_folder(target: Path, write: Callable[[Path], list[Path]]) -> list[Path]:
    """Write a folder of files so that no reader ever sees half of it; the paths written, under ``target``.

    ``write(folder)`` fills a temporary sibling of ``target``. A new ``target`` is that sibling renamed;
    into an existing one (a user's ``--out`` may hold other files) each file is moved by an atomic rename.
    If ``write`` fails, the sibling is removed and ``target`` is as it was.
    """
    import os
    import tempfile

    if target.exists() and not target.is_dir():
        fail(f"{target}: is a file, expected a folder to write the report into")
    blocker = next((p for p in target.parents if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        fail(f"{target}: {blocker} is a file, not a folder, so the report cannot be written there")
    from bench_core.kernel.errors import is_input_os_error, machine_fault

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.writing-", dir=target.parent))
    except OSError as exc:
        if is_input_os_error(exc):
            fail(f"{target}: cannot write the report there ({exc.strerror})")
        raise machine_fault(exc, target, "write the report into") from None
    try:
        written = write(scratch)
        if not target.exists():
            os.replace(scratch, target)
        else:
            for path in sorted(scratch.rglob("*"), key=lambda p: len(p.parts)):
                destination = target / path.relative_to(scratch)
                if path.is_dir():
                    destination.mkdir(exist_ok=True)
                else:
                    os.replace(path, destination)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [target / path.relative_to(scratch) for path in written]


def started() -> None:
    """Mark the running command's calls as started: from now on a refusal keeps its run directory."""
    _Started.value = True


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error naming what is wrong (as plain text: file names and labels may hold ``[...]``) and exit
    (2: bad input, 1: a fault of the machine)."""
    cli_fail(message, code)


def make_runner(
    store: ResultStore,
    *,
    concurrency: int,
    timeout: float,
    progress: bool,
    retry: RetryPolicy,
    batch: Any = None,
) -> Runner | BatchRunner:
    """The runner of a bench command, its progress bar on stderr (the run has started: its directory stays).

    ``batch`` (the command's ``cli.batch.BatchOptions``): with ``--batch``, a ``BatchRunner`` that sends the
    calls through the provider's batch API and falls back on this runner.
    """
    from bench_core.kernel.runner import Runner

    started()
    repaired = store.repair()
    if repaired:
        err.print(
            f"note: {store.path}: cut away an incomplete last line ({repaired} bytes, left by a killed run); "
            "its call is made again."
        )
    runner = Runner(store, concurrency=concurrency, retry=retry, timeout=timeout, progress=progress, console=err)
    return batch.wrap(runner) if batch is not None else runner


def finish_run(store: ResultStore, summary: str, *, failed: int, batch: Any = None) -> None:
    """Close the store, print the run's one-line account (and, after ``--batch``, its usage and cost), and exit 1
    when calls failed (they can be retried)."""
    store.close()
    if batch is not None:
        batch.report(store.path.parent)
    err.print(summary, highlight=False)
    if failed:
        raise typer.Exit(1)


def run_to_end(main: Callable[[], Awaitable[T]], store: ResultStore, models: Sequence[Any], runner: Any = None) -> T:
    """Run ``main`` on a new event loop; on Ctrl-C close the store, say how to resume and exit 130.

    With a ``BatchRunner`` the first Ctrl-C stops waiting (the batches go on at the provider, a rerun collects
    them) and a second one, within a few seconds, cancels them at the provider.
    """
    import asyncio
    import signal

    from bench_core.kernel.batch_runner import BatchInterrupted

    async def wrapped() -> T:
        loop = asyncio.get_running_loop()
        handled = False
        if runner is not None and hasattr(runner, "request_cancel"):
            task = asyncio.current_task()
            presses = [0]

            def on_sigint() -> None:
                presses[0] += 1
                if presses[0] == 1 and task is not None:
                    task.cancel()
                else:
                    runner.request_cancel()

            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
                handled = True
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread: Ctrl-C as usual
                handled = False
        try:
            return await main()
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            for model in models:
                await model.aclose()

    try:
        return asyncio.run(wrapped())
    except BatchInterrupted as exc:
        store.close()
        directory = store.path.parent
        if exc.cancelled:
            err.print(
                f"cancelled: the batches of {directory} were cancelled at the provider. Run the same command again "
                "to collect what they finished before the cancel and to send the rest again."
            )
        else:
            err.print(
                f"interrupted: {exc.open_batches} batch(es) keep running at the provider. Run the same command "
                f"again to collect their answers (nothing is submitted twice), or cancel them with "
                f"bench batch cancel {directory}"
            )
        raise typer.Exit(130) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        store.close()
        err.print(
            f"interrupted: finished calls are saved in {store.path}; "
            "run the same command again to resume (no finished call is repeated)."
        )
        raise typer.Exit(130) from None


def pct_ci(block: dict[str, Any], rate: str) -> str:
    """``block[rate]`` in % with its ``<rate>_ci`` in brackets: "38.2 (28.8–48.6)" ("–" when undefined)."""
    value, ci = block.get(rate), block.get(f"{rate}_ci")
    if value is None:
        return "–"
    return f"{pct(value)} ({pct(ci[0])}–{pct(ci[1])})" if ci else pct(value)


class ReportConsole(Console):
    """The console of report tables: a table wider than the terminal is printed stacked, never cut.

    Rich squeezes a too-wide table by cutting cells with an ellipsis (``71.4 (35.9–…``) and dropping
    narrow columns such as ``n``. Here a table that does not fit is printed row by row instead: the
    first cell as a heading, then one ``column: value`` line per cell, so every number and CI stays whole.
    User text (labels, file names) is printed as is (no markup).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{"markup": False, "highlight": False, **kwargs})

    def rule(self, title: Any = "", **kwargs: Any) -> None:  # type: ignore[override]
        if len(str(title)) + 6 > self.width:  # a long path in a rule would be cut: print it whole instead
            super().print(str(title), soft_wrap=True)
            return
        super().rule(title, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if len(objects) == 1 and isinstance(objects[0], Table) and not fits(self, objects[0]):
            for line in stacked(objects[0]):
                super().print(line, soft_wrap=True)
            return
        super().print(*objects, **kwargs)


def fits(console: Console, table: Table) -> bool:
    """True when ``table`` at its natural width fits the console (nothing would be cut or squeezed)."""
    from rich.measure import Measurement

    wide = console.options.update(width=100_000, max_width=100_000)
    return Measurement.get(console, wide, table).maximum <= console.width


def stacked(table: Table) -> list[str]:
    """A table as plain lines: its title, then per row the first cell and one ``column: value`` line per cell."""
    headers = [str(column.header) for column in table.columns]
    cells = [[str(cell) for cell in column._cells] for column in table.columns]
    lines = [str(table.title)] if table.title else []
    for index in range(table.row_count):
        lines.append(f"  {headers[0]}: {cells[0][index]}")
        lines += [f"    {headers[c]}: {cells[c][index]}" for c in range(1, len(headers)) if cells[c][index] != ""]
    return lines


def table(
    title: str | None,
    columns: Sequence[str],
    *,
    left: Collection[str] = (),
    no_wrap: bool = False,
    title_justify: str = "left",
) -> Table:
    """A terminal table whose ``left`` columns (default: the first) are left-aligned and the rest, numbers, right."""
    left = set(left) or {columns[0]}
    out = Table(title=title, title_justify=title_justify)  # type: ignore[arg-type]
    for column in columns:
        out.add_column(column, justify="left" if column in left else "right", no_wrap=no_wrap)
    return out
