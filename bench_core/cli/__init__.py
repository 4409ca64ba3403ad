"""The ``bench`` command group: the one layer that imports several designs; flags and terminal output live here.

``app`` is the group that ``medrev bench`` mounts (``review_app.cli``) and ``python -m bench_core`` runs;
``MedrevGroup``, ``DEBUG_HELP`` and ``debug_option`` are the command line's one error path (``cli.errors``),
which ``medrev`` uses too. Names are imported on first use (PEP 562): taking the error path does not build
the bench commands, so ``medrev --help`` starts fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench_core.cli.errors import DEBUG_HELP, MedrevGroup, debug_option
    from bench_core.cli.main import app

__all__ = ["DEBUG_HELP", "MedrevGroup", "app", "debug_option"]
_EXPORTS = {
    "DEBUG_HELP": "bench_core.cli.errors",
    "MedrevGroup": "bench_core.cli.errors",
    "debug_option": "bench_core.cli.errors",
    "app": "bench_core.cli.main",
}


def __getattr__(name: str) -> Any:
    """Import an exported name on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
