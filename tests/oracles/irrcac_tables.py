"""The rating tables of the irrCAC oracle's fixture: stdlib only, seeded, so the same cases come out of any Python.

Imported by ``irrcac_oracle.py`` (its sibling, from this folder) in compute mode; it never imports medrev.
"""

from __future__ import annotations

import random

WEIGHTS: tuple[str, ...] = ("identity", "linear", "quadratic", "ordinal")

Table = list[list[float | None]]


def _panel(
    rng: random.Random,
    n_units: int,
    n_raters: int,
    categories: list[float],
    *,
    per_unit: tuple[int, int] | None = None,
    p_missing: float = 0.0,
    p_agree: float = 0.7,
    used: list[float] | None = None,
) -> Table:
    """Units x raters with a latent category per unit and raters who mostly agree (None: not rated).

    ``per_unit=(lo, hi)``: each unit is rated by lo..hi raters drawn from the panel (partial overlap);
    otherwise every cell is rated except with probability ``p_missing``. ``used`` restricts the ratings
    to some of the categories, leaving the others unused.
    """
    values = sorted(used if used is not None else categories)
    q = len(values)
    table: Table = []
    for _ in range(n_units):
        latent = rng.randrange(q)
        if per_unit is not None:
            raters = set(rng.sample(range(n_raters), rng.randint(*per_unit)))
        else:
            raters = {j for j in range(n_raters) if rng.random() >= p_missing}
        row: list[float | None] = []
        for j in range(n_raters):
            if j not in raters:
                row.append(None)
                continue
            draw = rng.random()
            if draw < p_agree:
                index = latent
            elif draw < p_agree + (1 - p_agree) * 0.7:
                index = min(max(latent + rng.choice((-1, 1)), 0), q - 1)
            else:
                index = rng.randrange(q)
            row.append(values[index])
        table.append(row)
    return table


def _number(value: float) -> float | int:
    """Integers stay integers in the JSON (scores 0, 1, 2 as the app stores them); 0.5 stays 0.5."""
    return int(value) if float(value).is_integer() else float(value)


def tables(handbook: Table) -> list[dict[str, object]]:
    """Every table of the fixture with its categories and the variants it is computed with.

    Each entry: ``id``, ``description``, ``table``, ``categories``, ``weights`` (the weightings),
    ``min_ratings`` (1 keeps singly rated units, 2 removes them before irrCAC sees the table) and
    ``confidence`` (the levels).
    """
    rng = random.Random(20140101)
    out: list[dict[str, object]] = []

    def add(
        id_: str,
        description: str,
        table: Table,
        categories: list[float],
        *,
        weights: tuple[str, ...] = WEIGHTS,
        min_ratings: tuple[int, ...] = (2,),
        confidence: tuple[float, ...] = (0.95,),
    ) -> None:
        out.append(
            {
                "id": id_,
                "description": description,
                "table": [[None if x is None else _number(x) for x in row] for row in table],
                "categories": [_number(c) for c in categories],
                "weights": list(weights),
                "min_ratings": list(min_ratings),
                "confidence": list(confidence),
            }
        )

    five = [1, 2, 3, 4, 5]
    three = [0, 1, 2]
    signed = [-1, 0, 1]
    binary = [0, 1]
    uneven = [0, 0.5, 1, 3]
    add(
        "handbook-4x12",
        "Gwet (2014) 4 raters x 12 units (irrCAC.datasets.raw_4raters; Krippendorff 2011's reliability data); "
        "unit 12 has one rating",
        handbook,
        five,
        min_ratings=(1, 2),
    )
    add(
        "handbook-4x12-90",
        "the handbook table at 90% confidence",
        handbook,
        five,
        min_ratings=(1, 2),
        confidence=(0.9,),
    )
    add(
        "unused-0-of-012",
        "nobody uses 0 of {0, 1, 2}: the full category set changes AC2 (medrev's unused-score test table)",
        [[2, 2, None], [2, 1, None], [1, 1, None], [2, 2, None], [1, 2, None], [2, 2, None], [2, 2, 1], [1, 1, None]],
        three,
    )
    add(
        "unused-3-of-uneven",
        "nobody uses 3 of {0, 0.5, 1, 3}: the unused extreme sets the linear/quadratic span",
        _panel(rng, 25, 3, uneven, used=[0, 0.5, 1]),
        uneven,
    )
    add(
        "unused-5-of-1to5",
        "nobody uses 5 of {1..5}, 4 raters with missing ratings",
        _panel(rng, 30, 4, five, used=[1, 2, 3, 4], p_missing=0.2),
        five,
    )
    panel = _panel(rng, 60, 10, three, per_unit=(2, 3))
    panel += [[None] * 10, [None] * 10]  # tasks nobody rated: irrCAC drops them, medrev never sees them
    add("panel-10-of-012", "partial overlap: each unit rated by 2-3 of 10 raters, two units unrated", panel, three)
    add(
        "panel-10-signed",
        "partial overlap on {-1, 0, 1} (the judge audit's label scale): 2-3 of 10 raters per unit",
        _panel(rng, 40, 10, signed, per_unit=(2, 3), p_agree=0.6),
        signed,
    )
    add(
        "singly-rated-5-panel",
        "1-3 of 5 raters per unit, about a third of the units singly rated",
        _panel(rng, 40, 5, three, per_unit=(1, 3)),
        three,
        min_ratings=(1, 2),
    )
    add(
        "singly-rated-12-panel-1to5",
        "1-4 of 12 raters per unit on {1..5}",
        _panel(rng, 50, 12, five, per_unit=(1, 4), p_agree=0.6),
        five,
        min_ratings=(1, 2),
    )
    add("one-category-012", "every rating is 2 of {0, 1, 2}", [[2, 2, 2]] * 10, three)
    add(
        "one-category-binary-missing",
        "every rating is 1 of {0, 1}, missing and singly rated units",
        [[1, 1], [1, None], [None, 1], [1, 1], [1, 1], [None, 1], [1, 1], [1, 1]],
        binary,
        weights=("identity",),
        min_ratings=(1, 2),
    )
    # With 2 or 3 raters a missing cell often leaves a unit singly rated, so both min_ratings are
    # computed; with more raters it seldom does and the two would be the same numbers.
    rater_sets = {2: (three, 30), 3: (signed, 30), 5: (five, 30), 10: (binary, 25), 20: (uneven, 20)}
    for n_raters, (categories, n_units) in rater_sets.items():
        add(
            f"raters-{n_raters}-complete",
            f"{n_raters} raters rate every one of {n_units} units",
            _panel(rng, n_units, n_raters, categories),
            categories,
        )
        add(
            f"raters-{n_raters}-incomplete",
            f"{n_raters} raters, each cell missing with probability 0.3",
            _panel(rng, n_units, n_raters, categories, p_missing=0.3),
            categories,
            min_ratings=(1, 2) if n_raters <= 3 else (2,),
        )
    add(
        "uneven-4-raters",
        "4 raters on the unevenly spaced {0, 0.5, 1, 3}",
        _panel(rng, 40, 4, uneven, p_missing=0.15, p_agree=0.6),
        uneven,
    )
    add(
        "binary-2-raters",
        "two raters on a 0/1 outcome with a rare class (AC1's paradox-resistant case)",
        [[1, 1]] * 3 + [[0, 0]] * 22 + [[0, 1], [1, 0], [0, 1]],
        binary,
        weights=("identity",),
    )
    add("two-units", "two units, three raters: one degree of freedom", [[0, 0, 1], [2, 2, 2]], three)
    add(
        "two-units-symmetric",
        "two units whose linearised terms coincide: zero variance (irrCAC's 1e-15 placeholder or a rounding residue)",
        [[0, 1, 1], [2, 2, 1]],
        three,
    )
    add(
        "disagreement-3units",
        "three units in total disagreement: the Student-t interval on 2 df reaches below -1",
        [[0, 2], [2, 0], [1, 1]],
        three,
    )
    add(
        "large-200",
        "200 units, 6 raters, 1-4 ratings per unit",
        _panel(rng, 200, 6, five, per_unit=(1, 4), p_agree=0.65),
        five,
        min_ratings=(1, 2),
    )
    add(
        "large-200-90",
        "a second 200-unit table at 90% confidence",
        _panel(rng, 200, 3, three, p_missing=0.1),
        three,
        weights=("identity", "ordinal"),
        confidence=(0.9,),
    )
    add(
        "no-dual-ratings",
        "every unit has one rating: Gwet's pa is undefined",
        [[0, None], [None, 2], [1, None], [None, 1]],
        three,
        weights=("ordinal",),
        min_ratings=(1,),
    )
    return out
