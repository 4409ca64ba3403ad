"""MedMisBench (epistemic resilience): multiple-choice questions with option-aligned misleading context.

The public face of the design: what packages outside bench_core (the review app) use. Inside, the
roles are one module each: ``items`` (MCQItem, InjectionBundle), ``taxonomy`` (the single source of
truth), ``data`` (the released format), ``release``, ``conditions``, ``targets``, ``prompts``,
``answers``, ``run``, ``metrics`` and ``report``.
"""

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
    prepare_items,
    read_run,
    read_run_data,
)
from bench_core.medmisbench.targets import DEFAULT_SEED, draw_type1_target
from bench_core.medmisbench.taxonomy import CONTENT_TYPE_IDS, PROVENANCE_IDS

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
    "load_medmisbench",
    "prepare_items",
    "read_run",
    "read_run_data",
    "taxonomy",
]
