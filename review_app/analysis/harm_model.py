"""Random-intercept logistic regression fitted by maximum likelihood, as lme4::glmer does it.

The harm model of a review study is ``worst_case ~ model + content_type + provenance + stratum +
(1 | reviewer)`` on one row per annotation: a binary outcome, categorical fixed effects and one
random intercept per group. statsmodels has no maximum-likelihood GLMM (its BinomialBayesMixedGLM
is variational Bayes and gives different numbers), so the model is fitted here with numpy/scipy:

* The marginal likelihood integrates each group's intercept ``sigma * u``, ``u ~ N(0, 1)``, out
  by the Laplace approximation (``n_agq=1``, lme4's default) or adaptive Gauss-Hermite quadrature
  (``n_agq > 1``, lme4's ``nAGQ``), both centred on the conditional mode found by Newton steps.
* The parameters are the fixed effects and the random-intercept SD ``sigma >= 0``, optimised
  jointly with L-BFGS-B (analytic gradients). ``sigma`` is lme4's ``theta`` for this
  model; optimising it on its natural scale with a bound at 0 (not ``log sigma``) lets a zero
  variance be reached exactly, as in lme4, instead of drifting towards minus infinity.
* Standard errors come from the inverse Hessian of the negative log-likelihood in (beta, sigma),
  computed by finite differences at the optimum, as lme4's default ``vcov`` does. At a boundary fit
  (sigma = 0) the beta block alone is inverted.

**Separation.** A level of a factor whose rows are all 0 (no events: the paper's 0 of 3
"potentially true" items) or all 1 has no finite maximum-likelihood coefficient: the likelihood keeps
rising as that coefficient runs to minus (plus) infinity, and those rows' contribution tends to zero.
lme4 stops somewhere along that ray (a huge estimate with a huge SE) and reports every other term
normally. Here the limit is taken exactly: the separated term is marked (``Term.separated``,
``HarmModelResult.separated_terms``), reported as not estimable (no number), and the other terms are
the maximum-likelihood estimates with the rows of the separated level set aside, which is what the
likelihood converges to (checked against glmer on ``tests/data/sim_harm_separated.csv``). Separation
found only after fitting (quasi-complete: an estimate beyond |10| log-odds with an exploding SE) is
marked the same way and its direction is left out of the covariance of the others.

**Penalised fit (opt-in).** ``penalty="normal"`` maximises the Laplace (or AGHQ) log-likelihood plus
the log density of independent normal priors on the fixed effects, SD 10 on the intercept and 2.5
on every other coefficient: exactly the objective of R's ``blme::bglmer(..., fixef.prior =
normal(sd = c(10, 2.5)), cov.prior = NULL)`` (no prior on the reviewer variance, which stays a
maximum-likelihood estimate). Why this prior: 2.5 on the log-odds scale is Gelman et al.'s (2008)
weakly informative scale for a coefficient of a 0/1 indicator; it says an odds ratio beyond about
e^5 ~ 150 between two levels is implausible, which gives separated terms a finite estimate while
moving well-identified ones only slightly. The normal (rather than Cauchy) form keeps the penalised
objective concave in the fixed effects, so the maximum is unique, and is the form bglmer documents
for fixed effects. SD 10 on the intercept leaves the baseline rate essentially free. ``normal:SD``
and ``normal:INTERCEPT_SD,SD`` change the scales.

Tests check the estimates against lme4::glmer (within 2e-3 on each log-odds coefficient and 1 % on
the variance) on lme4's ``cbpp`` data and on simulated data sets shaped like the review study, with
and without separation, and the penalised fit against blme::bglmer.

A fit that cannot be trusted is still returned, with ``warnings`` naming why: separation, aliased
terms that were dropped, non-convergence, a boundary (zero) variance, a single group.

The input's checks and coding, and the search for separated levels, are
:mod:`review_app.analysis.harm_model_design`; the result and its printing and refitting are
:mod:`review_app.analysis.harm_model_result`; ``docs/methods.md`` (The harm model) gives the
formulas.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import linalg, optimize, sparse, stats
from scipy.special import expit

from review_app.analysis.harm_model_design import _build_design, _cells, _detect_separation, _independent_columns
from review_app.analysis.harm_model_result import (
    BOUNDARY_SD,
    HUGE_ESTIMATE,
    HUGE_SE,
    INTERCEPT,
    LATENT_LOGISTIC_VARIANCE,
    HarmModelResult,
    Penalty,
    Term,
)
from review_app.analysis.layout import AnalysisInputError, RowOffset


def fit_random_intercept_logit(
    data: pd.DataFrame,
    outcome: str,
    fixed: Sequence[str],
    group: str,
    *,
    reference: Mapping[str, str] | None = None,
    n_agq: int = 1,
    confidence: float = 0.95,
    penalty: Penalty | str | None = None,
    row_offset: RowOffset = 0,
) -> HarmModelResult:
    """Fit ``outcome ~ fixed... + (1 | group)`` by maximum likelihood (or penalised likelihood).

    ``outcome`` holds 0/1 (or booleans, or true/false text); every ``fixed`` column is treated as
    categorical with treatment coding. ``reference`` maps a column to its reference level; a column
    not named there takes its most frequent level (ties broken alphabetically), and the result says so
    in ``reference_sources``: callers with a substantive reference (the review study's harm model uses
    the paper's, see :func:`review_app.analysis.study_harm_model.harm_model_references`) pass it explicitly.
    Rows missing the outcome, a fixed column or the group are dropped and counted. ``n_agq=1`` is the
    Laplace approximation; larger values use adaptive Gauss-Hermite quadrature with that many nodes.
    ``penalty`` (see :class:`Penalty`) selects the opt-in penalised fit. ``row_offset`` turns a frame
    position into the line number the user sees (2 for a CSV with a header) in error messages.
    """
    if int(n_agq) != n_agq or n_agq < 1 or n_agq > 50:
        raise AnalysisInputError(f"n_agq must be a whole number from 1 to 50 (got {n_agq})")
    if not 0 < confidence < 1:
        raise AnalysisInputError(f"confidence must lie strictly between 0 and 1 (got {confidence})")
    penalty = Penalty.parse(penalty)
    design = _build_design(data, outcome, list(fixed), group, dict(reference or {}), row_offset=row_offset)
    warnings = list(design.warnings)
    separation = _detect_separation(design, penalised=penalty.active)
    warnings.extend(separation.warnings)
    not_estimable = dict(separation.terms)
    p = design.X.shape[1]
    if penalty.active:
        rows, cols = np.ones(len(design.y), dtype=bool), list(range(p))
    else:
        # The maximum-likelihood limit: the separated levels' rows contribute nothing, so the other terms
        # are fitted on the rest. A separated non-reference level's column is then all zero and leaves the
        # fit; the columns of a factor whose reference level is separated stay in (one is aliased with the
        # intercept and dropped) so that the remaining levels still differ, but are reported as not estimable.
        rows = separation.rows
        y_left = design.y[rows]
        if len(y_left) == 0 or y_left.min() == y_left.max():
            raise AnalysisInputError(
                "once the separated levels are set aside, the remaining annotations all have the same outcome, so "
                "no term is estimable by maximum likelihood; a penalised fit (penalty normal) gives finite estimates"
            )
        cols = []
        for j in range(p):
            if design.X[rows, j].any():
                cols.append(j)
            elif j not in not_estimable:
                not_estimable[j] = "no annotations left once the separated levels are set aside"
        keep = _independent_columns(design.X[np.ix_(rows, cols)])
        for position, j in enumerate(cols):
            if position not in keep and j not in not_estimable:
                not_estimable[j] = "not identifiable once the separated levels are set aside"
        cols = [cols[k] for k in keep]
    names = [design.names[j] for j in cols]
    fit = _Fit(
        design.y[rows], design.X[np.ix_(rows, cols)], design.groups[rows], design.n_groups, int(n_agq),
        penalty.precision(names),
    )  # fmt: skip
    beta, sigma, converged, fit_warnings = fit.maximise()
    warnings.extend(fit_warnings)
    boundary = sigma < BOUNDARY_SD
    if boundary:
        sigma = 0.0
        warnings.append(
            f"boundary (singular) fit: the {group} variance is estimated as 0, so the model reduces to an "
            "ordinary logistic regression; the ICC is 0 by construction"
        )
    diverged = [] if penalty.active else [k for k in range(len(cols)) if abs(beta[k]) > HUGE_ESTIMATE]
    cov, cov_warning = fit.covariance(beta, sigma, boundary, exclude=diverged)
    if cov_warning:
        warnings.append(cov_warning)
        converged = False
    for k in diverged:
        if cols[k] in not_estimable:
            continue
        not_estimable[cols[k]] = "quasi-complete separation: the estimate diverges"
        warnings.append(
            f"term {design.names[cols[k]]}: log-odds {beta[k]:.3g} keeps growing: quasi-complete separation (a "
            "combination of levels with no events or only events), so it is reported as not estimable"
        )
    loglik = fit.loglik(beta, sigma)
    z_crit = stats.norm.ppf(0.5 + confidence / 2)
    position = {j: k for k, j in enumerate(cols)}
    terms = []
    for j, name in enumerate(design.names):
        column = design.columns[j]
        ref = design.reference.get(column) if column else None
        why = not_estimable.get(j)
        k = position.get(j)
        if k is None or (why is not None and not penalty.active):
            nan = float("nan")
            terms.append(Term(name, column, design.levels[j], nan, nan, nan, nan, nan, nan, nan, True, why, ref))
            continue
        estimate = float(beta[k])
        se = float(math.sqrt(cov[k, k])) if np.isfinite(cov[k, k]) and cov[k, k] >= 0 else float("nan")
        z = estimate / se if se and np.isfinite(se) else float("nan")
        p_value = float(2 * stats.norm.sf(abs(z))) if np.isfinite(z) else float("nan")
        terms.append(
            Term(
                name=name,
                column=column,
                level=design.levels[j],
                estimate=estimate,
                se=se,
                z=z,
                p_value=p_value,
                odds_ratio=_safe_exp(estimate),
                or_ci_low=_safe_exp(estimate - z_crit * se),
                or_ci_high=_safe_exp(estimate + z_crit * se),
                separated=why is not None,
                separation=why,
                reference=ref,
            )
        )
        if name != INTERCEPT and (abs(estimate) > HUGE_ESTIMATE or (np.isfinite(se) and se > HUGE_SE)):
            warnings.append(
                f"term {name}: log-odds {estimate:.3g} with SE {se:.3g} is implausibly large even with the "
                f"{penalty.key} prior; its odds ratio and CI are not interpretable"
            )
    if design.n_groups == 1:
        warnings.append(f"only one {group} group: the group variance is not identifiable")
    variance = sigma**2
    return HarmModelResult(
        outcome=outcome,
        fixed=tuple(fixed),
        group=group,
        method="laplace" if n_agq == 1 else "aghq",
        n_agq=int(n_agq),
        n=len(design.y),
        n_events=int(design.y.sum()),
        n_groups=design.n_groups,
        converged=bool(converged),
        loglik=float(loglik),
        group_variance=float(variance),
        icc=float(variance / (variance + LATENT_LOGISTIC_VARIANCE)),
        terms=tuple(terms),
        reference_levels=design.reference,
        warnings=tuple(dict.fromkeys(warnings)),
        dropped_rows=design.dropped_rows,
        confidence=confidence,
        penalty=penalty,
        reference_sources=design.reference_sources,
    )


def _safe_exp(value: float) -> float:
    if not np.isfinite(value):
        return float("nan")
    return float(math.exp(min(value, 700.0)))


class _Fit:
    """The approximate marginal log-likelihood of one data set and its maximisation.

    The rows are held as cells (:func:`_cells`): ``X`` and ``g`` per cell, ``n`` rows and ``s``
    events in each.
    """

    def __init__(
        self,
        y: np.ndarray,
        X: np.ndarray,
        groups: np.ndarray,
        n_groups: int,
        n_agq: int,
        prior_precision: np.ndarray | None = None,
    ) -> None:
        self.X, self.g, self.n, self.s = _cells(np.asarray(y, float), X, np.asarray(groups, np.int64), n_groups)
        self.G, self.n_agq = n_groups, n_agq
        # Independent normal priors N(0, 1 / precision) on the fixed effects (zeros: plain likelihood).
        self.precision = np.zeros(X.shape[1]) if prior_precision is None else np.asarray(prior_precision, float)
        cells = len(self.g)
        self.ZT = sparse.csr_matrix((np.ones(cells), (self.g, np.arange(cells))), shape=(n_groups, cells))
        self.u = np.zeros(n_groups)  # warm start for the conditional modes
        if n_agq > 1:
            nodes, weights = np.polynomial.hermite_e.hermegauss(n_agq)  # weight function exp(-z^2 / 2)
            self.nodes, self.log_weights = nodes, np.log(weights) + nodes**2 / 2

    def _gsum(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.g, weights=values, minlength=self.G)

    def _h(self, xb: np.ndarray, sigma: float, u: np.ndarray) -> np.ndarray:
        eta = xb + sigma * u[self.g]
        return self._gsum(self.s * eta - self.n * np.logaddexp(0.0, eta)) - u**2 / 2

    def modes(self, xb: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
        """Conditional modes of the spherical group effects and the curvature there (per group)."""
        u = self.u.copy() if sigma > 0 else np.zeros(self.G)
        h = self._h(xb, sigma, u)
        for _ in range(100):
            mu = expit(xb + sigma * u[self.g])
            grad = sigma * self._gsum(self.s - self.n * mu) - u
            curv = sigma**2 * self._gsum(self.n * mu * (1 - mu)) + 1
            step = grad / curv
            if np.max(np.abs(step)) < 1e-11:
                break
            # h is strictly concave in u; halve a step only where it would overshoot.
            for _ in range(30):
                trial = u + step
                h_trial = self._h(xb, sigma, trial)
                worse = h_trial < h - 1e-12
                if not worse.any():
                    break
                step = np.where(worse, step / 2, step)
            u, h = trial, h_trial
        mu = expit(xb + sigma * u[self.g])
        curv = sigma**2 * self._gsum(self.n * mu * (1 - mu)) + 1
        self.u = u
        return u, curv

    def loglik(self, beta: np.ndarray, sigma: float) -> float:
        xb = self.X @ beta
        u, curv = self.modes(xb, sigma)
        if self.n_agq == 1 or sigma == 0:
            return float(np.sum(self._h(xb, sigma, u) - 0.5 * np.log(curv)))
        scale = 1 / np.sqrt(curv)
        # h at every node of every group: the quadrature of exp(h) around the mode.
        terms = np.empty((self.n_agq, self.G))
        for k, z in enumerate(self.nodes):
            terms[k] = self._h(xb, sigma, u + scale * z) + self.log_weights[k]
        per_group = np.log(scale) + np.logaddexp.reduce(terms, axis=0) - 0.5 * math.log(2 * math.pi)
        return float(np.sum(per_group))

    def gradient(self, beta: np.ndarray, sigma: float) -> np.ndarray:
        """Exact gradient of the approximate log-likelihood in (beta, sigma).

        The mode u and the curvature H move with the parameters; their derivatives follow from the
        implicit function theorem on h'(u) = 0. For Laplace, l_j = h_j(u) - log(H_j) / 2. For
        adaptive quadrature, l_j = log s_j + log sum_k exp(h_j(u + s_j z_k) + log w_k) with
        s_j = H_j^(-1/2), and every node moves with u and s.
        """
        xb = self.X @ beta
        u, curv = self.modes(xb, sigma)
        mu = expit(xb + sigma * u[self.g])
        r = self.s - self.n * mu
        w = self.n * mu * (1 - mu)
        dw = w * (1 - 2 * mu)  # d w / d eta
        wx = self.ZT @ (w[:, None] * self.X)  # per-group sums, G x p
        dwx = self.ZT @ (dw[:, None] * self.X)
        sum_r, sum_w, sum_dw = self._gsum(r), self._gsum(w), self._gsum(dw)
        du_dbeta = -sigma * wx / curv[:, None]
        du_dsigma = (sum_r - sigma * sum_w * u) / curv
        dcurv_dbeta = sigma**2 * (dwx + sum_dw[:, None] * sigma * du_dbeta)
        dcurv_dsigma = 2 * sigma * sum_w + sigma**2 * sum_dw * (u + sigma * du_dsigma)
        dlogs_dbeta = -0.5 * dcurv_dbeta / curv[:, None]  # d log s / d beta, with s = H^(-1/2)
        dlogs_dsigma = -0.5 * dcurv_dsigma / curv
        if self.n_agq == 1 or sigma == 0:
            g_beta = self.X.T @ r + np.sum(dlogs_dbeta, axis=0)
            g_sigma = float(np.sum(u * sum_r) + np.sum(dlogs_dsigma))
            return np.append(g_beta, g_sigma)
        scale = 1 / np.sqrt(curv)
        nodes = u[None, :] + scale[None, :] * self.nodes[:, None]  # K x G
        log_terms = np.stack([self._h(xb, sigma, nodes[k]) for k in range(self.n_agq)]) + self.log_weights[:, None]
        weights = np.exp(log_terms - np.logaddexp.reduce(log_terms, axis=0))  # softmax over nodes, K x G
        g_beta = np.sum(dlogs_dbeta, axis=0)
        g_sigma = float(np.sum(dlogs_dsigma))
        for k in range(self.n_agq):
            r_k = self.s - self.n * expit(xb + sigma * nodes[k][self.g])
            sum_r_k = self._gsum(r_k)
            slope = sigma * sum_r_k - nodes[k]  # h'(u) at the node, per group
            move_beta = du_dbeta + (self.nodes[k] * scale)[:, None] * dlogs_dbeta  # d node / d beta
            move_sigma = du_dsigma + self.nodes[k] * scale * dlogs_dsigma
            g_beta = g_beta + self.X.T @ (weights[k][self.g] * r_k) + (weights[k] * slope) @ move_beta
            g_sigma += float(np.sum(weights[k] * (nodes[k] * sum_r_k + slope * move_sigma)))
        return np.append(g_beta, g_sigma)

    def objective(self, beta: np.ndarray, sigma: float) -> float:
        """What is maximised: the log-likelihood plus the log prior kernel of the fixed effects (if any)."""
        return self.loglik(beta, sigma) - 0.5 * float(np.sum(self.precision * beta**2))

    def objective_gradient(self, beta: np.ndarray, sigma: float) -> np.ndarray:
        grad = self.gradient(beta, sigma)
        grad[: len(beta)] -= self.precision * beta
        return grad

    def _start(self) -> np.ndarray:
        """Ordinary logistic regression by a few damped Newton steps, then sigma = 1 as lme4 starts."""
        beta = np.zeros(self.X.shape[1])
        rate = self.s.sum() / self.n.sum()
        beta[0] = math.log(rate / (1 - rate))
        for _ in range(25):
            mu = expit(self.X @ beta)
            hess = self.X.T @ (self.X * (self.n * mu * (1 - mu))[:, None]) + np.diag(self.precision + 1e-6)
            step = np.linalg.solve(hess, self.X.T @ (self.s - self.n * mu) - self.precision * beta)
            beta = beta + np.clip(step, -2, 2)
            if np.max(np.abs(step)) < 1e-8:
                break
        return np.append(np.clip(beta, -10, 10), 1.0)

    def maximise(self) -> tuple[np.ndarray, float, bool, list[str]]:
        p = self.X.shape[1]

        def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
            beta, sigma = params[:p], max(params[p], 0.0)
            return -self.objective(beta, sigma), -self.objective_gradient(beta, sigma)

        bounds = [(None, None)] * p + [(0.0, None)]
        start = self._start()
        result = optimize.minimize(
            objective,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9, "maxcor": 20},
        )
        params = result.x
        params, polished = self._polish(params)
        beta, sigma = params[:p], float(max(params[p], 0.0))
        grad = self.objective_gradient(beta, sigma)
        # Projected gradient: at sigma = 0 only an ascent direction into sigma > 0 counts.
        projected = grad.copy()
        if sigma == 0 and projected[p] < 0:
            projected[p] = 0.0
        scale = max(1.0, abs(self.objective(beta, sigma)))
        warnings: list[str] = []
        converged = bool(np.max(np.abs(projected)) < 1e-4 * scale) and polished is not False
        if not converged:
            warnings.append(
                f"the optimiser did not converge (max |gradient| = {np.max(np.abs(projected)):.2g}, "
                f"{result.message}); estimates may be unreliable"
            )
        return beta, sigma, converged, warnings

    def _polish(self, params: np.ndarray) -> tuple[np.ndarray, bool | None]:
        """A few Newton steps from the L-BFGS-B solution, kept only where they raise the likelihood."""
        p = self.X.shape[1]
        current = -self.objective(params[:p], max(params[p], 0.0))
        for _ in range(5):
            grad = -self.objective_gradient(params[:p], max(params[p], 0.0))
            free = np.ones(len(params), dtype=bool)
            if params[p] <= 0 and grad[p] >= 0:
                free[p] = False
            if np.max(np.abs(grad[free])) < 1e-9:
                return params, True
            hess = self._hessian(params)[np.ix_(free, free)]
            try:
                with warnings.catch_warnings():
                    # Near a diverging direction the Hessian is ill-conditioned; the step is then checked
                    # against the likelihood below and dropped if it does not help.
                    warnings.simplefilter("ignore", linalg.LinAlgWarning)
                    step = linalg.solve(hess, grad[free], assume_a="sym")
            except (linalg.LinAlgError, ValueError):
                return params, None
            trial = params.copy()
            trial[free] -= step
            trial[p] = max(trial[p], 0.0)
            value = -self.objective(trial[:p], trial[p])
            if not np.isfinite(value) or value > current + 1e-12:
                return params, None
            params, current = trial, value
        return params, None

    def _hessian(self, params: np.ndarray) -> np.ndarray:
        """Hessian of the negative objective in (beta, sigma) by central differences of its gradient."""
        p = self.X.shape[1]
        k = len(params)
        hess = np.empty((k, k))
        for j in range(k):
            step = 1e-5 * max(1.0, abs(params[j]))
            up, down = params.copy(), params.copy()
            up[j] += step
            down[j] -= step
            if j == p and down[j] < 0:  # one-sided at the sigma = 0 boundary
                down[j] = params[j]
            g_up = -self.objective_gradient(up[:p], abs(up[p]))
            g_down = -self.objective_gradient(down[:p], abs(down[p]))
            hess[:, j] = (g_up - g_down) / (up[j] - down[j])
        return (hess + hess.T) / 2

    def covariance(
        self, beta: np.ndarray, sigma: float, boundary: bool, exclude: Sequence[int] = ()
    ) -> tuple[np.ndarray, str | None]:
        """Covariance of the fixed effects: the inverse Hessian of the negative objective, beta block.

        ``exclude`` names coefficients that diverge (quasi-complete separation). Along the diverging
        direction the curvature vanishes, so the Hessian is inverted on the directions that keep
        curvature (a pseudo-inverse dropping eigenvalues below 1e-9 of the largest); finite
        combinations of the diverging terms (such as intercept + a level) stay free, as they are in the
        likelihood's limit, and the other terms' variances are those of lme4's full inverse. The
        diverging terms' own entries are NaN.
        """
        p = self.X.shape[1]
        hess = self._hessian(np.append(beta, sigma))
        keep = list(range(p)) + ([] if boundary else [p])
        block = hess[np.ix_(keep, keep)]
        failure = (
            "the Hessian is not positive definite at the optimum: standard errors cannot be computed "
            "(typically separation or a term without information)"
        )
        try:
            eigen, vectors = np.linalg.eigh(block)
        except np.linalg.LinAlgError:
            return np.full((p, p), np.nan), failure
        tolerance = (1e-9 if exclude else 1e-10) * max(1.0, float(np.abs(eigen).max()))
        if eigen.min() < (-tolerance if exclude else tolerance) or not np.all(np.isfinite(eigen)):
            return np.full((p, p), np.nan), failure
        inverse = (vectors * np.where(eigen > tolerance, 1 / np.where(eigen > tolerance, eigen, 1), 0)) @ vectors.T
        cov = inverse[:p, :p].copy()
        for k in exclude:
            cov[k, :] = cov[:, k] = np.nan
        return cov, None
