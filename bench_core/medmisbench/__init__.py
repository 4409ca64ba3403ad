"""MedMisBench (epistemic resilience): multiple-choice questions with option-aligned misleading context.

The public face of the design: what packages outside bench_core (the review app) use. Inside, the
roles are one module each: ``items`` (MCQItem, InjectionBundle), ``taxonomy`` (the single source of
truth), ``data`` (the released format), ``release``, ``conditions``, ``targets``, ``prompts``,
``answers``, ``run``, ``metrics`` and ``report``.

The names are imported on first use (PEP 562), so importing one submodule does not load them all
(``medrev --help`` starts fast)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench_core.kernel.lazy import lazy_exports

if TYPE_CHECKING:
    from bench_core.medmisbench import taxonomy
    from bench_core.medmisbench.data import LoadReport, load_medmisbench
    from bench_core.medmisbench.items import InjectionBundle, MCQItem
    from bench_core.medmisbench.run import (
        ITEMS_FILE,
        PreparedItem,
        ResponseRecord,
        RunData,
        RunDirError,
        is_run_dir,
        item_warnings,
        prepare_items,
        read_run,
        read_run_data,
    )
    from bench_core.medmisbench.targets import DEFAULT_SEED, draw_type1_target
    from bench_core.medmisbench.taxonomy import CONTENT_TYPE_IDS, PROVENANCE_IDS

_EXPORTS = {
    "taxonomy": ("bench_core.medmisbench", "taxonomy"),
    "LoadReport": ("bench_core.medmisbench.data", "LoadReport"),
    "load_medmisbench": ("bench_core.medmisbench.data", "load_medmisbench"),
    "InjectionBundle": ("bench_core.medmisbench.items", "InjectionBundle"),
    "MCQItem": ("bench_core.medmisbench.items", "MCQItem"),
    "ITEMS_FILE": ("bench_core.medmisbench.run", "ITEMS_FILE"),
    "PreparedItem": ("bench_core.medmisbench.run", "PreparedItem"),
    "ResponseRecord": ("bench_core.medmisbench.run", "ResponseRecord"),
    "RunData": ("bench_core.medmisbench.run", "RunData"),
    "RunDirError": ("bench_core.medmisbench.run", "RunDirError"),
    "is_run_dir": ("bench_core.medmisbench.run", "is_run_dir"),
    "item_warnings": ("bench_core.medmisbench.run", "item_warnings"),
    "prepare_items": ("bench_core.medmisbench.run", "prepare_items"),
    "read_run": ("bench_core.medmisbench.run", "read_run"),
    "read_run_data": ("bench_core.medmisbench.run", "read_run_data"),
    "DEFAULT_SEED": ("bench_core.medmisbench.targets", "DEFAULT_SEED"),
    "draw_type1_target": ("bench_core.medmisbench.targets", "draw_type1_target"),
    "CONTENT_TYPE_IDS": ("bench_core.medmisbench.taxonomy", "CONTENT_TYPE_IDS"),
    "PROVENANCE_IDS": ("bench_core.medmisbench.taxonomy", "PROVENANCE_IDS"),
}

__all__ = [
    "CONTENT_TYPE_IDS",
    "DEFAULT_SEED",
    "ITEMS_FILE",
    "PROVENANCE_IDS",
    "InjectionBundle",
    "LoadReport",
    "MCQItem",
    "PreparedItem",
    "ResponseRecord",
    "RunData",
    "RunDirError",
    "draw_type1_target",
    "is_run_dir",
    "item_warnings",
    "load_medmisbench",
    "prepare_items",
    "read_run",
    "read_run_data",
    "taxonomy",
]


__getattr__ = lazy_exports(__name__, globals(), _EXPORTS)
