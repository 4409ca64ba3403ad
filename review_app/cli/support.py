"""What every medrev command shares: the database engine, error reporting, JSON output.

``console`` prints text as it is: user-supplied names (studies, reviewers) may contain ``[/]`` or
other Rich markup, so markup is off for every print and every table cell; a print that wants
colour passes ``markup=True`` and escapes what it interpolates (``rich.markup.escape``).
``friendly_errors`` is where a review command's expected failures become one line on stderr: exit code 2
for bad input and a service's refusal, 1 for a database fault (``DatabaseUnavailable``: unreachable,
read-only, a folder...). Everything it lets through is caught by the ``medrev`` group
(``bench_core.cli.errors.MedrevGroup``): the same codes, and a log file for an unexpected exception.
Raise ``bench_core.kernel.errors.InputError(path, line, field, expected, found)`` for bad input.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from bench_core.kernel.errors import DatasetError
from review_app.errors import ServiceError

console = Console(soft_wrap=True, markup=False)  # long paths stay on one line for scripts and logs
err_console = Console(stderr=True, soft_wrap=True, markup=False)
F = TypeVar("F", bound=Callable[..., Any])
EXIT_ERROR = 2
EXIT_MACHINE = 1


def engine(*, create: bool = False):
    """The engine for MEDREV_DATABASE_URL, connected and migrated on first use (faults: one sentence).

    Only commands that start a study's data (``create=True``: import, user add, study create) may
    create a missing SQLite file; the others refuse it, so a mistyped path is reported, not started.
    """
    from review_app.db.connect import get_engine

    return get_engine(create=create)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: message`` on stderr (the message as plain text) and exit with ``code`` (2: bad input,
    1: a fault of the machine or the database). With ``--debug`` (MEDREV_DEBUG=1) the traceback of the exception
    being handled, if any, comes first."""
    caught = sys.exc_info()[1]
    if caught is not None and os.environ.get("MEDREV_DEBUG", "").strip().lower() in ("1", "true", "yes", "on"):
        traceback.print_exception(type(caught), caught, caught.__traceback__, file=sys.stderr)
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code=code)


def friendly_errors(func: F) -> F:
    """Turn expected failures into one clear message on stderr and exit code 2, or 1 for a database fault.

    Expected: a service's refusal (``ServiceError``, which includes every database fault as one
    sentence), bad input (``DatasetError``, ``ValueError``), and a database error met outside the
    data layer's own checks, which is classified here against the configured URL.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from sqlalchemy.exc import SQLAlchemyError  # here, not at the top: --help never loads SQLAlchemy

        from review_app.db.errors import DatabaseUnavailable

        try:
            return func(*args, **kwargs)
        except DatabaseUnavailable as exc:
            fail(str(exc), EXIT_MACHINE)
        except (ServiceError, DatasetError, ValueError) as exc:
            fail(str(exc))
        except SQLAlchemyError as exc:
            fault = _database_fault(exc)
            if fault is None:
                raise
            fail(str(fault), EXIT_MACHINE)

    return wrapper  # type: ignore[return-value]


def _database_fault(exc: Exception) -> ServiceError | None:
    from review_app.config import get_settings
    from review_app.db.errors import classify

    try:
        return classify(exc, get_settings().database_url)
    except Exception:  # an unreadable URL: the original error is the better report
        return None


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")
