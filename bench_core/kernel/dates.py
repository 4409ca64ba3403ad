"""Dates in input files and on the command line: ISO 8601 or refused.

A provenance date ("retrieved 2026-03-01") is evidence of which version of a source was used; a free
text such as "last tuesday" would be written into a run's provenance and read as a date by nobody.
So every date medrev reads is an ISO 8601 calendar date (``YYYY-MM-DD``) or a full ISO date and time
(``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` with an optional ``Z`` or ``+HH:MM`` offset; a space may stand for
the ``T``), checked to exist (no 2026-02-30), and anything else is refused naming where it was found.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from bench_core.kernel.errors import InputError

EXPECTED = "an ISO 8601 date (YYYY-MM-DD) or date and time (e.g. 2026-03-01T09:30:00Z)"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?")


def is_iso_date(text: str) -> bool:
    """True when ``text`` is an ISO 8601 date or date and time that exists on the calendar."""
    text = text.strip()
    try:
        if _DATE.fullmatch(text):
            dt.date.fromisoformat(text)
            return True
        if _DATETIME.fullmatch(text):
            dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
            return True
    except ValueError:  # a well-formed date that does not exist (month 13, 30 February)
        return False
    return False


def check_iso_date(
    value: object, *, path: str | Path | None = None, line: int | None = None, field: str | None = None
) -> str:
    """``value`` as stripped text when it is an ISO 8601 date (see the module docstring); ``InputError``
    naming ``path``, ``line`` and ``field`` (for an argument: ``path`` None, ``field`` the option) otherwise."""
    if isinstance(value, str) and is_iso_date(value):
        return value.strip()
    raise InputError(path, line, field, expected=EXPECTED, found=repr(value))
