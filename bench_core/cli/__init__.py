"""The ``bench`` command group: the one layer that imports several designs; flags and terminal output live here.

``app`` is the group that ``medrev bench`` mounts (``review_app.cli``) and ``python -m bench_core`` runs;
``MedrevGroup``, ``DEBUG_HELP`` and ``debug_option`` are the command line's one error path (``cli.errors``),
which ``medrev`` uses too. Names are imported on first use (PEP 562): taking the error path does not build
the bench commands, so ``medrev --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_core.kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from bench_core.cli.errors import DEBUG_HELP, MedrevGroup, debug_option
    from bench_core.cli.main import app

__all__ = ["DEBUG_HELP", "MedrevGroup", "app", "debug_option"]
_EXPORTS = {
    "DEBUG_HELP": ("bench_core.cli.errors", "DEBUG_HELP"),
    "MedrevGroup": ("bench_core.cli.errors", "MedrevGroup"),
    "debug_option": ("bench_core.cli.errors", "debug_option"),
    "app": ("bench_core.cli.main", "app"),
}


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
