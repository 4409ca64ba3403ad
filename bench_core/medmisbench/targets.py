"""The Type 1 target option: stored with the benchmark, or drawn once per item from a seed.

The authors' notebook draws the target with an unseeded ``random.choice`` on every run, so two
models never see the same item-context pairs. Here a target written in the benchmark file
(``type1_target``, written by ``bench generate`` and the release export) is used as it is; otherwise
the draw depends only on the seed and the item's identity (not on file order or on which other
items are loaded), so every model, every rerun and the review app all see the same target.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from bench_core.kernel.rundir import seeded_int

if TYPE_CHECKING:  # annotations only: the CLI reads DEFAULT_SEED without loading the item model
    from bench_core.medmisbench.items import MCQItem

DEFAULT_SEED = 20260101


def draw_type1_target(item: MCQItem, seed: int = DEFAULT_SEED) -> str | None:
    """The wrong option whose misleading sentence is delivered alone under Type 1.

    The item's stored target when it has one. Otherwise a seeded choice among
    ``item.type1_candidates`` (for medrev's reading only when the bundle is usable, see
    ``MCQItem.usable_bundle_problem``); None when there is nothing to choose from. For an item whose
    bundle is usable both readings have the same candidates in the same order, so the same seed gives
    the same target under either protocol.
    """
    if item.type1_target is not None:
        return item.type1_target
    if item.reading != "authors" and item.usable_bundle_problem() is not None:
        return None
    candidates = item.type1_candidates
    if not candidates:
        return None
    rng = random.Random(seeded_int(seed, item.subset, item.id))
    return rng.choice(candidates)


def target_source(item: MCQItem, target: str | None) -> str | None:
    """Where the target came from: ``"file"`` (stored with the benchmark), ``"seed"`` (drawn) or None."""
    if target is None:
        return None
    return "file" if item.type1_target is not None else "seed"
