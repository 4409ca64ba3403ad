"""Write ``sim_harm_separated.csv``: ``sim_harm.csv`` reshaped into the paper's separation pattern.

MedMisBench App. B.2 reports 0 of 3 "potentially true" tasks as worst case, so a harm model with a
clarity-stratum term meets a level without events. This keeps three potentially-true tasks (none
of them threshold corruption; their annotations all set to not worst case), moves the other
potentially-true tasks to the soft stratum, and, for the all-events direction, sets every
threshold-corruption annotation to worst case.

It also writes ``quasi_separated.csv``: 300 rows, factors a (x, y), b (p, q), c (u, v, w) and 10
groups, where no single level is separated but the cells (a=x, b=p) hold no events and (a=y, b=q)
only events: quasi-complete separation that shows only in the fit (diverging a, b and intercept).

Deterministic; ``lme4_separation_reference.R`` fits the written files with lme4::glmer and
blme::bglmer. The files are committed, so the tests need neither this script nor R.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
OUT = HERE / "sim_harm_separated.csv"
QUASI = HERE / "quasi_separated.csv"


def main() -> None:
    data = pd.read_csv(HERE / "sim_harm.csv")
    true_rows = data.loc[data["stratum"] == "potentially_true"]
    candidates = sorted(true_rows.loc[true_rows["content_type"] != "threshold_corruption", "task_id"].unique())
    keep = candidates[:3]
    move = sorted(set(true_rows["task_id"]) - set(keep))
    data.loc[data["task_id"].isin(move), "stratum"] = "soft"
    data.loc[data["task_id"].isin(keep), "worst_case"] = 0
    data.loc[data["content_type"] == "threshold_corruption", "worst_case"] = 1
    data.to_csv(OUT, index=False)
    print(f"wrote {OUT} with {len(data)} rows, {data['worst_case'].sum()} worst-case")
    print(data.groupby("stratum")["worst_case"].agg(["count", "sum"]))
    print(data.groupby("content_type")["worst_case"].agg(["count", "sum"]))
    quasi()


def quasi() -> None:
    rng = np.random.default_rng(5)
    n = 300
    data = pd.DataFrame(
        {
            "g": rng.choice([f"G{i}" for i in range(10)], n),
            "a": rng.choice(["x", "y"], n),
            "b": rng.choice(["p", "q"], n),
            "c": rng.choice(["u", "v", "w"], n),
        }
    )
    eta = -0.5 + (data["c"] == "v") * 0.7
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    y[((data["a"] == "x") & (data["b"] == "p")).to_numpy()] = 0
    y[((data["a"] == "y") & (data["b"] == "q")).to_numpy()] = 1
    data["y"] = y
    data.to_csv(QUASI, index=False)
    print(f"wrote {QUASI}")
    print(data.groupby(["a", "b"])["y"].agg(["count", "sum"]))


if __name__ == "__main__":
    main()
