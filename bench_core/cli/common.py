"""What the ``bench`` commands share: error exit, stderr console, running to completion or Ctrl-C, rate cells."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from bench_core.cli.errors import fail as cli_fail
from bench_core.kernel.report_files import pct
from bench_core.kernel.runner import RetryPolicy, Runner
from bench_core.kernel.store import ResultStore

err = Console(stderr=True, markup=False, highlight=False)  # user text (labels, file names) printed as is
T = TypeVar("T")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error naming what is wrong (as plain text: file names and labels may hold ``[...]``) and exit
    (2: bad input, 1: a fault of the machine)."""
    cli_fail(message, code)


def make_runner(store: ResultStore, *, concurrency: int, timeout: float, progress: bool, retry: RetryPolicy) -> Runner:
    """The runner of a bench command, its progress bar on stderr."""
    return Runner(store, concurrency=concurrency, retry=retry, timeout=timeout, progress=progress, console=err)


def finish_run(store: ResultStore, summary: str, *, failed: int) -> None:
    """Close the store, print the run's one-line account, and exit 1 when calls failed (they can be retried)."""
    store.close()
    err.print(summary, highlight=False)
    if failed:
        raise typer.Exit(1)


def run_to_end(main: Callable[[], Awaitable[T]], store: ResultStore, models: Sequence[Any]) -> T:
    """Run ``main`` on a new event loop; on Ctrl-C close the store, say how to resume and exit 130."""

    async def wrapped() -> T:
        try:
            return await main()
        finally:
            for model in models:
                await model.aclose()

    try:
        return asyncio.run(wrapped())
    except KeyboardInterrupt:
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
