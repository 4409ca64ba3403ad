"""What every medrev command shares: the database engine, error reporting, JSON output."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from bench_core.kernel.errors import DatasetError
from review_app.services.errors import ServiceError

console = Console(soft_wrap=True)  # long paths stay on one line for scripts and logs
err_console = Console(stderr=True, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def engine():
    """The engine for MEDREV_DATABASE_URL, migrated on first use."""
    from review_app.db.engine import get_engine

    return get_engine()


def friendly_errors(func: F) -> F:
    """Turn expected failures into one clear message on stderr and exit code 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (ServiceError, DatasetError, ValueError) as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(code=2) from None

    return wrapper  # type: ignore[return-value]


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
