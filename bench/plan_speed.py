"""Speed of study planning for a study of about 1,000 tasks, in worker processes against one process.

Three plans whose answer is near 1,000 tasks: a Wilson rate (closed form plus 2,000 simulated
studies), AC2 (about 1,000 dual-rated tasks) and a harm-model odds ratio (about 1,000 tasks, 72 %
dual-rated, each simulated study fitted by Laplace ML). Each plan is run with every available core
and, as the baseline measured in the same run, with one process; the plans must be identical (every
simulation has its own seed). Target: each plan under 30 s with the cores of this machine.

    .venv/bin/python bench/plan_speed.py
"""

from __future__ import annotations

import time

from review_app.analysis.sample_size import default_workers, plan_ac2, plan_harm_or, plan_rate

PLANS = {
    "rate 0.38, CI width 0.06": lambda w: plan_rate(0.38, 0.06, seed=1, workers=w),
    "AC2 0.6, CI width 0.065": lambda w: plan_ac2(0.6, 0.065, seed=1, workers=w),
    "harm OR 1.32, power 0.8, 10 reviewers, ICC 0.1": lambda w: plan_harm_or(
        1.32, 0.8, reviewers=10, icc=0.1, seed=1, workers=w
    ),
}


def main() -> None:
    cores = default_workers()
    print(f"{'plan':<48} {'tasks':>6} {'dual':>6} {'sims':>6} {cores} proc. s {'1 proc. s':>10} {'ratio':>6}")
    for label, run in PLANS.items():
        start = time.perf_counter()
        parallel = run(cores)
        fast = time.perf_counter() - start
        start = time.perf_counter()
        serial = run(1)
        slow = time.perf_counter() - start
        same = "" if parallel.to_dict() == serial.to_dict() else "  PLANS DIFFER"
        print(
            f"{label:<48} {parallel.n_tasks:>6} {parallel.n_dual:>6} {parallel.simulations:>6} {fast:>9.1f} "
            f"{slow:>10.1f} {slow / fast:>6.2f}{same}"
        )


if __name__ == "__main__":
    main()
