"""Sample sizes for a study plan: how many tasks, how many of them dual-rated, and how many reviewer-hours.

A lead states what the study must deliver and gets the sample size that delivers it:

* **rate** (``plan_rate``): a task-level rate such as the conservative worst-case rate, reported
  with a Wilson 95% CI of at most a given width. The size is the closed-form solution of the
  Wilson width at the expected rate (see :func:`wilson_sample_size`); a seeded simulation of
  binomial outcomes at that size reports the CI width actually achieved (the width varies with
  the observed rate).
* **AC2** (``plan_ac2``): Gwet's AC2 on one rubric dimension with a CI of at most a given width.
  Agreement is computed on dual-rated tasks only, so this sets the number of dual-rated tasks.
  Ratings are simulated from a latent-normal (ordinal probit) model: a task's true value
  ``T ~ N(0, 1)``, each rater reads ``sqrt(rho) T + sqrt(1 - rho) E``, and cut points give the
  category marginals (uniform unless a pilot supplies them). ``rho`` is solved exactly (bivariate
  normal rectangle probabilities) so that the expected AC2 equals the stated value, and every
  simulated study is scored by :func:`review_app.analysis.agreement.agreement`, the same call (and
  the same Gwet/irrCAC interval) as the Agreement page.
* **harm-model odds ratio** (``plan_harm_or``): power to detect an adjusted odds ratio of the harm
  model. Annotations are simulated from the random-intercept logit ``logit P(y) = b0 + b1 x + u_r``
  with ``u_r ~ N(0, s^2)`` and ``s^2 = ICC / (1 - ICC) * pi^2 / 3`` over the planned number of
  reviewers; each simulated study is fitted with
  :func:`review_app.analysis.harm_model.fit_random_intercept_logit` (Laplace ML, as the Analysis page
  does) and counts as a rejection when the Wald test of ``b1`` rejects at ``alpha`` in the stated
  direction. The number of tasks is found by a geometric search over a coarse grid with few
  simulations, then refined on a probit curve of power against sqrt(n) fitted to every simulation
  run so far, and confirmed by a final batch at the chosen size.

With a **pilot** (any metric), its data replace the assumptions: the observed task outcomes are
resampled (rate), its dual-rated tasks are resampled with their ratings (AC2; with an expected
value given, only its category marginals are used), or its tasks' covariates are resampled and
outcomes drawn from its fitted harm model with the tested term set to the planned odds ratio
(harm-OR). Reviewer-hours use the pilot's median time on task.

Every simulation draws from its own ``numpy.random.SeedSequence(seed, spawn_key=(i,))``, where
``i`` counts simulations in the order the plan asks for them; results therefore do not depend on
how many worker processes ran them, and the same seed gives the same plan.

The metrics live in :mod:`.rate`, :mod:`.ac2` and :mod:`.harm_odds_ratio`, the result and input
checks in :mod:`.plan`, the worker processes in :mod:`.simulation`; ``docs/methods.md`` (Study
planning) gives the formulas.
"""

from __future__ import annotations

from review_app.analysis.sample_size.ac2 import MAX_AC2_TASKS, expected_ac2, latent_correlation, plan_ac2
from review_app.analysis.sample_size.harm_odds_ratio import HarmPilot, plan_harm_or
from review_app.analysis.sample_size.plan import (
    DEFAULT_DUAL_SHARE,
    DEFAULT_HARM_BASELINE,
    METRICS,
    Plan,
    combine,
)
from review_app.analysis.sample_size.rate import plan_rate, wilson_sample_size, wilson_width
from review_app.analysis.sample_size.simulation import Progress, default_workers

__all__ = [
    "DEFAULT_DUAL_SHARE",
    "DEFAULT_HARM_BASELINE",
    "MAX_AC2_TASKS",
    "METRICS",
    "HarmPilot",
    "Plan",
    "Progress",
    "combine",
    "default_workers",
    "expected_ac2",
    "latent_correlation",
    "plan_ac2",
    "plan_harm_or",
    "plan_rate",
    "wilson_sample_size",
    "wilson_width",
]
