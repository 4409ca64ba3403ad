"""The Type 1 target option, drawn once per item from a seed.

The authors' notebook draws the target with an unseeded ``random.choice`` on every run, so two
models never see the same item-context pairs. Here the draw depends only on the seed and the
item's identity (not on file order or on which other items are loaded), so every model, every
rerun and the review app all see the same target.
"""

from __future__ import annotations

import random

from bench_core.kernel.rundir import seeded_int
from bench_core.medmisbench.items import MCQItem

DEFAULT_SEED = 20260101


def draw_type1_target(item: MCQItem, seed: int = DEFAULT_SEED) -> str | None:
    """The wrong option whose misleading sentence is delivered alone under Type 1.

    Returns None when the item's bundle is unusable (see ``MCQItem.usable_bundle_problem``).
    """
    if item.usable_bundle_problem() is not None:
        return None
    rng = random.Random(seeded_int(seed, item.subset, item.id))
    return rng.choice(item.wrong_labels)
