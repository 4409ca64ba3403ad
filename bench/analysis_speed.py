"""Speed of the review analysis on a large simulated study: 20,000 annotations from 100 reviewers.

Prints seconds for agreement (Gwet's AC2 with its SE + ordinal alpha, then with a 1,000-resample bootstrap CI)
and for the harm model (Laplace and 5-point adaptive quadrature), each beside a baseline measured in
the same run on the same data: an ordinary logistic regression (statsmodels GLM, no random effect)
for the harm model, and the bare point estimate for the bootstrap. Target: harm model under 10 s.

    .venv/bin/python bench/analysis_speed.py
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import statsmodels.api as sm

from review_app.analysis.agreement import agreement
from review_app.analysis.harm_model import fit_random_intercept_logit

FIXED = ["model", "content_type", "provenance", "stratum"]


def simulate(n_tasks: int = 10_000, n_raters: int = 100, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    raters = np.array([f"R{i:03d}" for i in range(n_raters)])
    tasks = pd.DataFrame(
        {
            "task_id": np.arange(n_tasks),
            "model": rng.choice(["claude", "gemini", "gpt"], n_tasks),
            "content_type": rng.choice(["cue", "exception", "inversion", "anchoring", "threshold"], n_tasks),
            "provenance": rng.choice(["neutral", "authority", "patient"], n_tasks),
            "stratum": rng.choice(["clear", "soft", "potentially_true"], n_tasks, p=[0.7, 0.25, 0.05]),
            "latent": rng.normal(0, 1, n_tasks),
        }
    )
    pairs = np.array([rng.choice(n_raters, 2, replace=False) for _ in range(n_tasks)])
    data = tasks.loc[tasks.index.repeat(2)].reset_index(drop=True)
    data["rater"] = raters[pairs.ravel()]
    severity = dict(zip(raters, rng.normal(0, 0.7, n_raters), strict=True))
    eta = (
        -0.5
        + data["rater"].map(severity)
        + (data["provenance"] == "patient") * -0.6
        + (data["content_type"] == "exception") * 0.7
    )
    data["worst_case"] = (rng.random(len(data)) < 1 / (1 + np.exp(-eta))).astype(int)
    noisy = data["latent"] + rng.normal(0, 0.6, len(data))
    data["harm_potential"] = np.digitize(-noisy, [-0.5, 0.5])  # 0, 1, 2
    return data


def timed(label: str, func):
    start = time.perf_counter()
    result = func()
    seconds = time.perf_counter() - start
    print(f"{label:<58} {seconds:8.2f} s")
    return result, seconds


def main() -> None:
    data = simulate()
    print(f"{len(data)} annotations, {data['task_id'].nunique()} tasks, {data['rater'].nunique()} reviewers\n")

    point, t_point = timed("agreement: AC2 + SE (Gwet) + ordinal alpha", lambda: agreement(data, "harm_potential"))
    boot, t_boot = timed(
        "agreement: same + bootstrap CI (1,000 resamples)",
        lambda: agreement(data, "harm_potential", n_boot=1000, seed=0),
    )
    print(
        f"  AC2 = {boot.coefficient:.4f}, SE CI {boot.ci_low:.4f}-{boot.ci_high:.4f}, "
        f"bootstrap CI {boot.bootstrap_ci[0]:.4f}-{boot.bootstrap_ci[1]:.4f}, alpha = {point.alpha_ordinal:.4f}"
    )
    print(f"  bootstrap / point-estimate time: {t_boot / t_point:.1f}x\n")

    design = pd.get_dummies(data[FIXED], drop_first=True, dtype=float)
    _, t_glm = timed(
        "baseline: logistic GLM, no random effect (statsmodels)",
        lambda: sm.GLM(data["worst_case"], sm.add_constant(design), family=sm.families.Binomial()).fit(),
    )
    laplace, t_laplace = timed(
        "harm model: random-intercept logit, Laplace",
        lambda: fit_random_intercept_logit(data, "worst_case", FIXED, "rater"),
    )
    aghq, t_aghq = timed(
        "harm model: random-intercept logit, AGHQ 5 points",
        lambda: fit_random_intercept_logit(data, "worst_case", FIXED, "rater", n_agq=5),
    )
    print(
        f"  Laplace: converged={laplace.converged}, variance={laplace.group_variance:.4f} (simulated 0.49), "
        f"ICC={laplace.icc:.4f}; AGHQ variance={aghq.group_variance:.4f}"
    )
    print(f"  Laplace / GLM time: {t_laplace / t_glm:.1f}x; AGHQ / GLM: {t_aghq / t_glm:.1f}x")
    print(f"  target: harm model under 10 s -> {'met' if max(t_laplace, t_aghq) < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
