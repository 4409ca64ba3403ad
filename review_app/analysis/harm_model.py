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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg, optimize, sparse, stats
from scipy.special import expit

from review_app.analysis.layout import AnalysisInputError, RowOffset, is_text_dtype, require_columns, where
from review_app.analysis.priors import DEFAULT_PRIOR_INTERCEPT_SD, DEFAULT_PRIOR_SD

LATENT_LOGISTIC_VARIANCE = math.pi**2 / 3
INTERCEPT = "Intercept"
# Above these a log-odds coefficient or its SE means the likelihood has no finite maximum in that
# direction (separation); the numbers are artefacts of where the optimiser stopped.
HUGE_ESTIMATE = 10.0
HUGE_SE = 10.0
# A random-intercept SD below this is reported as a boundary (zero-variance) fit.
BOUNDARY_SD = 1e-4
MOST_FREQUENT = "most frequent level"
GIVEN = "given"
NO_EVENTS = "no events in this level"
ALL_EVENTS = "every annotation in this level is an event"

PENALTIES: tuple[str, ...] = ("none", "normal")


@dataclass(frozen=True)
class Penalty:
    """The fixed-effect prior of a penalised fit (``kind="none"``: plain maximum likelihood)."""

    kind: str = "none"
    intercept_sd: float = DEFAULT_PRIOR_INTERCEPT_SD
    sd: float = DEFAULT_PRIOR_SD

    @classmethod
    def parse(cls, value: Penalty | str | None) -> Penalty:
        """``None``/``"none"``, ``"normal"``, ``"normal:SD"`` or ``"normal:INTERCEPT_SD,SD"``."""
        if isinstance(value, Penalty):
            return value
        text = (value or "none").strip().lower()
        kind, colon, scales = text.partition(":")
        if kind not in PENALTIES or (kind == "none" and colon):
            raise AnalysisInputError(
                f"unknown penalty {value!r}: choose none or normal (optionally normal:SD or normal:INTERCEPT_SD,SD)"
            )
        if kind == "none":
            return cls()
        if not colon:
            return cls("normal")
        try:
            numbers = [float(part) for part in scales.split(",")]
        except ValueError:
            numbers = []
        if len(numbers) not in (1, 2) or not all(math.isfinite(v) and v > 0 for v in numbers):
            raise AnalysisInputError(
                f"penalty {value!r}: the prior scales must be one or two positive numbers (normal:SD or "
                "normal:INTERCEPT_SD,SD)"
            )
        intercept_sd, sd = (DEFAULT_PRIOR_INTERCEPT_SD, numbers[0]) if len(numbers) == 1 else numbers
        return cls("normal", intercept_sd, sd)

    @property
    def active(self) -> bool:
        return self.kind != "none"

    @property
    def key(self) -> str:
        """The canonical option text (``none``, ``normal``, ``normal:1``, ``normal:5,1``)."""
        if not self.active:
            return "none"
        if (self.intercept_sd, self.sd) == (DEFAULT_PRIOR_INTERCEPT_SD, DEFAULT_PRIOR_SD):
            return "normal"
        if self.intercept_sd == DEFAULT_PRIOR_INTERCEPT_SD:
            return f"normal:{self.sd:g}"
        return f"normal:{self.intercept_sd:g},{self.sd:g}"

    @property
    def r_prior(self) -> str:
        """The same prior in blme's syntax."""
        return f"normal(sd = c({self.intercept_sd:g}, {self.sd:g}))"

    @property
    def label(self) -> str:
        """A short name for table captions and headers."""
        if not self.active:
            return "maximum likelihood"
        return (
            f"penalised likelihood, normal prior on fixed effects (SD {self.intercept_sd:g} intercept, "
            f"{self.sd:g} others)"
        )

    def describe(self) -> str:
        """One sentence naming the prior and its R equivalent."""
        if not self.active:
            return "maximum likelihood (no penalty), as lme4::glmer"
        return (
            "penalised likelihood: independent normal priors on the fixed effects, mean 0, "
            f"SD {self.intercept_sd:g} on the intercept and {self.sd:g} on every other coefficient; no prior on the "
            f"reviewer variance. Same objective as blme::bglmer(..., fixef.prior = {self.r_prior}, cov.prior = NULL)"
        )

    def precision(self, names: Sequence[str]) -> np.ndarray:
        """Prior precision (1 / SD^2) per coefficient; zeros without a penalty."""
        if not self.active:
            return np.zeros(len(names))
        return np.array([1 / self.intercept_sd**2 if n == INTERCEPT else 1 / self.sd**2 for n in names])


NO_PENALTY = Penalty()


@dataclass(frozen=True)
class Term:
    """One fixed-effect coefficient on the log-odds scale with its Wald statistics.

    ``separated`` marks a term whose level has no events or only events (or whose estimate diverged):
    under maximum likelihood its numbers are NaN (not estimable) and ``separation`` says why; under a
    penalised fit it has finite numbers, which come from the prior as much as from the data.
    """

    name: str
    column: str | None
    level: str | None
    estimate: float
    se: float
    z: float
    p_value: float
    odds_ratio: float
    or_ci_low: float
    or_ci_high: float
    separated: bool = False
    separation: str | None = None
    reference: str | None = None

    @property
    def estimable(self) -> bool:
        """Whether the term has a number to print (false for a separated term of a maximum-likelihood fit)."""
        return math.isfinite(self.estimate) and math.isfinite(self.se)

    def to_dict(self) -> dict[str, float | bool]:
        return {
            "estimate": self.estimate,
            "se": self.se,
            "odds_ratio": self.odds_ratio,
            "or_ci_low": self.or_ci_low,
            "or_ci_high": self.or_ci_high,
            "p_value": self.p_value,
            "separated": self.separated,
        }


@dataclass(frozen=True)
class HarmModelResult:
    """A fitted random-intercept logistic model: adjusted odds ratios, group variance, latent ICC."""

    outcome: str
    fixed: tuple[str, ...]
    group: str
    method: str
    n_agq: int
    n: int
    n_events: int
    n_groups: int
    converged: bool
    loglik: float
    group_variance: float
    icc: float
    terms: tuple[Term, ...]
    reference_levels: dict[str, str]
    warnings: tuple[str, ...] = ()
    dropped_rows: int = 0
    confidence: float = 0.95
    extra: dict[str, float] = field(default_factory=dict)
    penalty: Penalty = NO_PENALTY
    reference_sources: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def group_sd(self) -> float:
        return math.sqrt(self.group_variance)

    @property
    def formula(self) -> str:
        rhs = " + ".join(self.fixed) if self.fixed else "1"
        return f"{self.outcome} ~ {rhs} + (1 | {self.group})"

    @property
    def separated_terms(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms if t.separated)

    @property
    def estimation(self) -> str:
        """How the numbers were obtained, for captions: ML or the named penalty, and the integration."""
        integration = "Laplace" if self.n_agq == 1 else f"adaptive Gauss-Hermite, {self.n_agq} points"
        return f"{self.penalty.label}, {integration}"

    def term(self, name: str) -> Term:
        for term in self.terms:
            if term.name == name:
                return term
        raise KeyError(f"no term {name!r}; terms: {', '.join(t.name for t in self.terms)}")

    def separation_notes(self) -> list[str]:
        """One sentence per separated term: which level and why (for the CLI, the app and LaTeX)."""
        out = []
        for t in self.terms:
            if not t.separated:
                continue
            what = "the intercept" if t.column is None else f"{t.column} = {t.level} (against {t.reference})"
            if self.penalty.active:
                out.append(
                    f"{t.name}: {what}: {t.separation}; its finite estimate comes from the {self.penalty.key} prior"
                )
            else:
                out.append(f"{t.name}: {what}: not estimable ({t.separation})")
        return out

    def to_dict(self) -> dict[str, object]:
        """The SPEC's JSON shape (``medrev stats harm-model --json``), plus a few added keys."""
        return {
            "n": self.n,
            "n_groups": self.n_groups,
            "converged": self.converged,
            "loglik": self.loglik,
            "group_variance": self.group_variance,
            "icc": self.icc,
            "separated_terms": list(self.separated_terms),
            "penalty": self.penalty.key,
            "terms": {t.name: t.to_dict() for t in self.terms},
            "separation": {t.name: t.separation for t in self.terms if t.separated},
            "penalty_description": self.penalty.describe(),
            "n_events": self.n_events,
            "method": self.method,
            "n_agq": self.n_agq,
            "formula": self.formula,
            "reference_levels": dict(self.reference_levels),
            "reference_sources": dict(self.reference_sources),
            "dropped_rows": self.dropped_rows,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per term: estimate, SE, z, p, odds ratio and its CI, separation and reference."""
        rows = [
            {
                "term": t.name,
                "estimate": t.estimate,
                "se": t.se,
                "z": t.z,
                "p_value": t.p_value,
                "odds_ratio": t.odds_ratio,
                "or_ci_low": t.or_ci_low,
                "or_ci_high": t.or_ci_high,
                "separated": t.separated,
                "reference": t.reference,
            }
            for t in self.terms
        ]
        return pd.DataFrame(rows).set_index("term")

    def printable_frame(self) -> pd.DataFrame:
        """One row per term as a paper prints it: reference named, OR/CI/p formatted, separation spelled out."""
        from review_app.analysis.formatting import format_ci, format_odds_ratio, format_p

        rows = []
        for t in self.terms:
            if not t.estimable:
                note = f"not estimable ({t.separation or 'no standard error'})"
            elif t.separated:
                note = f"separated ({t.separation}): finite only through the {self.penalty.key} prior"
            else:
                note = ""
            rows.append(
                {
                    "term": t.name,
                    "reference": t.reference or "",
                    "odds ratio": format_odds_ratio(t.odds_ratio) if t.estimable else "n/e",
                    "95% CI": format_ci(t.or_ci_low, t.or_ci_high) if t.estimable else "n/e",
                    "p": format_p(t.p_value) if t.estimable else "n/e",
                    "note": note,
                    "log-odds": round(t.estimate, 4) if t.estimable else None,
                    "SE": round(t.se, 4) if t.estimable else None,
                }
            )
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """A plain-text report in the spirit of ``summary(glmer(...))``."""
        from review_app.analysis.formatting import format_odds_ratio, format_p

        level = round(self.confidence * 100)
        lines = [
            f"Random-intercept logistic regression ({self.estimation})",
            f"  {self.formula}",
            f"  n = {self.n} ({self.n_events} events), groups = {self.n_groups}, loglik = {self.loglik:.4f}, "
            f"converged = {self.converged}",
            f"  {self.group} variance = {self.group_variance:.4f} (SD {self.group_sd:.4f}), "
            f"latent ICC = {self.icc:.4f}",
            "  reference levels: " + (self.references_text() or "none"),
        ]
        if self.penalty.active:
            lines.append(f"  {self.penalty.describe()}")
        lines += ["", f"  {'term':<40} {'estimate':>9} {'SE':>8} {'OR':>9} {f'{level}% CI':>21} {'p':>8}"]
        for t in self.terms:
            if not t.estimable:
                lines.append(f"  {t.name:<40} not estimable ({t.separation or 'no standard error'})")
                continue
            ci = f"{format_odds_ratio(t.or_ci_low)}–{format_odds_ratio(t.or_ci_high)}"
            mark = " (separated)" if t.separated else ""
            lines.append(
                f"  {t.name:<40} {t.estimate:>9.4f} {t.se:>8.4f} {format_odds_ratio(t.odds_ratio):>9} {ci:>21} "
                f"{format_p(t.p_value):>8}{mark}"
            )
        if self.notes:
            lines.append("")
            lines.extend(f"  note: {n}" for n in self.notes)
        if self.warnings:
            lines.append("")
            lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def r_code(self, csv_path: str, *, subset: str | None = None) -> str:
        """R code that refits this model with lme4 (or blme for a penalised fit) on a CSV of its input.

        ``subset`` names a logical column of rows to keep (the export's ``in_model``). The factors are
        releveled to this fit's references, and the optimiser and nAGQ match, so ``summary(fit)`` shows
        the same estimates (a separated term: glmer's huge estimate and SE where this fit says not
        estimable).
        """
        lines = [
            "# Refit the harm model in R: lme4::glmer" + (" / blme::bglmer" if self.penalty.active else "") + ".",
            "library(lme4)",
        ]
        if self.penalty.active:
            lines.append("library(blme)")
        lines.append(f"d <- read.csv({_r_string(csv_path)}, stringsAsFactors = FALSE)")
        if subset:
            lines.append(f"d <- d[as.logical(d${subset}), ]  # the annotations that entered the model")
        for column, level in self.reference_levels.items():
            lines.append(f"d${column} <- relevel(factor(d${column}), ref = {_r_string(level)})")
        arguments = f"{self.formula}, data = d, family = binomial, nAGQ = {self.n_agq}"
        control = 'control = glmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))'
        if self.penalty.active:
            lines.append(
                f"fit <- bglmer({arguments}, fixef.prior = {self.penalty.r_prior}, cov.prior = NULL, {control})"
            )
        else:
            lines.append(f"fit <- glmer({arguments}, {control})")
        lines.append("summary(fit)")
        if self.separated_terms and not self.penalty.active:
            lines.append(
                "# Separated term(s) " + ", ".join(self.separated_terms) + ": glmer stops at a huge estimate with a "
                "huge SE; medrev reports them as not estimable. The other terms agree."
            )
        return "\n".join(lines) + "\n"

    def cli_command(self, csv_path: str) -> str:
        """The ``medrev stats harm-model`` call that refits this model on a CSV of its input."""
        import shlex

        parts = [
            "medrev stats harm-model",
            f"--input {shlex.quote(csv_path)}",
            f"--outcome {shlex.quote(self.outcome)}",
            f"--fixed {shlex.quote(','.join(self.fixed))}",
            f"--group {shlex.quote(self.group)}",
            *(f"--reference {shlex.quote(f'{c}={v}')}" for c, v in self.reference_levels.items()),
        ]
        if self.n_agq != 1:
            parts.append(f"--nagq {self.n_agq}")
        if self.penalty.active:
            parts.append(f"--penalty {self.penalty.key}")
        return " ".join(parts)

    def references_text(self) -> str:
        """``model=claude, provenance=neutral (most frequent level), ...``: each factor's reference."""
        parts = []
        for column, level in self.reference_levels.items():
            source = self.reference_sources.get(column)
            parts.append(f"{column}={level}" + (f" ({source})" if source and source != GIVEN else ""))
        return ", ".join(parts)

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class _Design:
    y: np.ndarray
    X: np.ndarray
    names: list[str]
    columns: list[str | None]
    levels: list[str | None]
    groups: np.ndarray
    n_groups: int
    reference: dict[str, str]
    warnings: list[str]
    dropped_rows: int
    reference_sources: dict[str, str] = field(default_factory=dict)
    factors: dict[str, np.ndarray] = field(default_factory=dict)  # column -> level per (complete) row


@dataclass(frozen=True)
class _Separation:
    terms: dict[int, str]  # design column -> why it is not estimable
    rows: np.ndarray  # rows that keep information once the separated levels are set aside
    warnings: list[str]


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
    the paper's, see :func:`review_app.analysis.rubric_b.harm_model_references`) pass it explicitly.
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


def _detect_separation(design: _Design, *, penalised: bool) -> _Separation:
    """Levels whose annotations are all 0 or all 1, found repeatedly until none is left.

    Setting a separated level's rows aside can leave another level without events among the rest
    (its other rows were all in the separated level), so the search repeats on the remaining rows.
    A separated reference level makes the intercept and every term of its column not estimable
    (each is a contrast against a level whose log-odds is infinite).
    """
    y = design.y
    rows = np.ones(len(y), dtype=bool)
    terms: dict[int, str] = {}
    warnings: list[str] = []
    index = {(c, lv): j for j, (c, lv) in enumerate(zip(design.columns, design.levels, strict=True)) if c is not None}
    outcome = "kept and given a finite estimate by the prior" if penalised else "reported as not estimable"
    changed = True
    while changed:
        changed = False
        for column, values in design.factors.items():
            for level in sorted(set(values[rows])):
                mask = rows & (values == level)
                n, events = int(mask.sum()), int(y[mask].sum())
                if 0 < events < n:
                    continue
                reason = NO_EVENTS if events == 0 else ALL_EVENTS
                counted = f"{events} of {n} annotation(s) are events"
                reference = design.reference.get(column)
                if level == reference:
                    why = f"the reference level {column} = {level} has {reason.replace('this level', 'it')}"
                    for j, c in enumerate(design.columns):
                        if (c == column or c is None) and j not in terms:
                            terms[j] = why
                    warnings.append(
                        f"separation: the reference level {column} = {level} has {counted}; the intercept and every "
                        f"{column} term are {outcome}; choose a reference level with and without events"
                    )
                elif (column, level) in index and index[(column, level)] not in terms:
                    terms[index[(column, level)]] = reason
                    warnings.append(
                        f"separation: {column} = {level}: {counted} ({reason}); its odds ratio against {reference} is "
                        f"{outcome}" + ("" if penalised else "; the other terms are estimated without its rows")
                    )
                else:
                    continue
                if not penalised:
                    rows &= ~mask
                    changed = True
        if penalised:
            break
    return _Separation(terms, rows, warnings)


def _r_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _safe_exp(value: float) -> float:
    if not np.isfinite(value):
        return float("nan")
    return float(math.exp(min(value, 700.0)))


_OUTCOME_WORDS = {"true": 1.0, "false": 0.0, "yes": 1.0, "no": 0.0}


def _outcome_number(value: object) -> object:
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, str):
        text = value.strip().lower()
        return _OUTCOME_WORDS.get(text, text)
    return value


def _where(position: int, row_offset: RowOffset) -> str:
    """``line N`` of the file or ``row N`` (0-based) of a frame (see ``layout.where``)."""
    return where(position, row_offset)


def _outcome_values(series: pd.Series, name: str, positions: np.ndarray, row_offset: RowOffset) -> np.ndarray:
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=float)
    # Each distinct value is read once (an outcome column holds a few over 100,000s of rows); values that
    # compare equal (1, 1.0, True) read as the same number, so this is the cell-by-cell reading.
    codes, uniques = pd.factorize(series, use_na_sentinel=False)
    numbers = pd.to_numeric(pd.Series([_outcome_number(u) for u in uniques], dtype=object), errors="coerce")
    values = numbers.to_numpy(dtype=float)[codes]
    bad = np.isnan(values) | ~np.isin(values, [0.0, 1.0])
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise AnalysisInputError(
            f"outcome column {name!r} must hold 0/1 (or true/false): {_where(int(positions[first]), row_offset)} "
            f"holds {series.iloc[first]!r} ({int(bad.sum())} such value(s) in all)"
        )
    return values


def _default_reference(levels: np.ndarray, counts: np.ndarray) -> str:
    """The most frequent level (``counts`` rows of each of ``levels``), ties broken alphabetically."""
    top = counts.max()
    return sorted(str(level) for level, count in zip(levels, counts, strict=True) if count == top)[0]


def _sorted_text_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """``pd.factorize(column.astype(str), sort=True)``'s codes and number of levels.

    A column of plain text (the reviewer names) is factorised as it is, converting nothing; other
    columns are converted to text cell by cell first, as before.
    """
    if is_text_dtype(column.dtype):
        codes, uniques = pd.factorize(column, sort=True)
        if all(type(u) is str for u in uniques):
            return codes.astype(np.int64), len(uniques)
    codes, uniques = pd.factorize(column.astype(str), sort=True)
    return codes.astype(np.int64), len(uniques)


def stripped_text(column: pd.Series) -> np.ndarray:
    """``column.astype(str).str.strip()`` as an object array, each distinct value converted once.

    The harm model's factor and group columns hold a handful of distinct texts over 100,000s of
    rows; converting and stripping every cell was seconds of each fit's preparation. Columns that
    hold anything but text (where ``astype(str)`` is per value) are converted cell by cell as before.
    """
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    if not all(type(u) is str for u in uniques):
        return column.astype(str).str.strip().to_numpy(dtype=object)
    texts = np.asarray([u.strip() for u in uniques] or [""], dtype=object)
    return texts[codes] if len(codes) else np.asarray([], dtype=object)


def blank_text(frame: pd.DataFrame) -> np.ndarray:
    """Cells that are text and empty once stripped (rows x columns of ``frame``), as a boolean array.

    The same as ``frame.map(lambda v: isinstance(v, str) and not v.strip())``, deciding each distinct
    value of a text column once; a numeric column holds no text, a mixed one is decided cell by cell.
    """
    out = np.zeros(frame.shape, dtype=bool)
    for j in range(frame.shape[1]):
        column = frame.iloc[:, j]
        if pd.api.types.is_numeric_dtype(column.dtype) or len(column) == 0:
            continue  # numbers and booleans: never text
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        if all(type(u) is str or pd.isna(u) for u in uniques):
            out[:, j] = np.asarray([type(u) is str and not u.strip() for u in uniques], dtype=bool)[codes]
        else:
            out[:, j] = [isinstance(v, str) and not v.strip() for v in column]
    return out


def _build_design(
    data: pd.DataFrame,
    outcome: str,
    fixed: list[str],
    group: str,
    reference: dict[str, str],
    *,
    row_offset: RowOffset = 0,
) -> _Design:
    if not isinstance(data, pd.DataFrame):
        raise AnalysisInputError("the harm model needs a pandas DataFrame")
    if len(set(fixed)) != len(fixed):
        raise AnalysisInputError(f"a fixed-effect column is listed twice: {', '.join(fixed)}")
    for name in (outcome, group):
        if name in fixed:
            raise AnalysisInputError(f"column {name!r} cannot be both a fixed effect and the outcome or group")
    if outcome == group:
        raise AnalysisInputError(f"column {outcome!r} cannot be both the outcome and the group")
    require_columns(data, [outcome, *fixed, group], what="harm-model input")
    unknown = sorted(set(reference) - set(fixed))
    if unknown:
        raise AnalysisInputError(
            f"reference level given for {', '.join(map(repr, unknown))}, which is not a fixed-effect column "
            f"(fixed: {', '.join(fixed) or 'none'})"
        )
    warnings: list[str] = []
    used = data[[outcome, *fixed, group]]
    blank = pd.DataFrame(blank_text(used), index=used.index, columns=used.columns)
    complete = ~(used.isna() | blank).any(axis=1)
    dropped = int((~complete).sum())
    if dropped:
        warnings.append(f"dropped {dropped} row(s) with a missing outcome, fixed-effect or group value")
    frame = used.loc[complete]
    if frame.empty:
        raise AnalysisInputError("no complete rows: every row misses the outcome, a fixed effect or the group")
    positions = np.flatnonzero(complete.to_numpy())
    y = _outcome_values(frame[outcome], outcome, positions, row_offset)
    if y.min() == y.max():
        raise AnalysisInputError(
            f"outcome {outcome!r} has no variation (every one of {len(y)} rows is {int(y[0])}); "
            "there is nothing to model"
        )
    names, columns, levels, blocks = [INTERCEPT], [None], [None], [np.ones(len(frame))]
    chosen: dict[str, str] = {}
    sources: dict[str, str] = {}
    factors: dict[str, np.ndarray] = {}
    for column in fixed:
        values = stripped_text(frame[column])
        codes, uniques = pd.factorize(values)
        present = sorted(uniques)
        if column in reference:
            ref = str(reference[column]).strip()
            if ref not in present:
                raise AnalysisInputError(
                    f"unknown reference level {ref!r} for column {column!r}; levels present: {', '.join(present)}"
                )
            sources[column] = GIVEN
        else:
            ref = _default_reference(uniques, np.bincount(codes, minlength=len(uniques)))
            sources[column] = MOST_FREQUENT
        chosen[column] = ref
        factors[column] = values
        code_of = {level: k for k, level in enumerate(uniques)}
        if isinstance(data[column].dtype, pd.CategoricalDtype):
            empty = [str(c) for c in data[column].cat.categories if str(c) not in present]
            if empty:
                warnings.append(f"column {column}: level(s) {', '.join(empty)} have no rows and get no term")
        if len(present) == 1:
            warnings.append(f"column {column} has a single level ({ref}) and contributes no term")
        for level in present:
            if level == ref:
                continue
            names.append(f"{column}[{level}]")
            columns.append(column)
            levels.append(level)
            blocks.append((codes == code_of[level]).astype(float))
    X = np.column_stack(blocks)
    keep = _independent_columns(X)
    if len(keep) < X.shape[1]:
        aliased = [names[j] for j in range(X.shape[1]) if j not in keep]
        warnings.append(
            f"the fixed-effect design is rank deficient: dropped aliased term(s) {', '.join(aliased)} "
            "(their levels coincide with a combination of other terms)"
        )
        X = X[:, keep]
        names = [names[j] for j in keep]
        columns = [columns[j] for j in keep]
        levels = [levels[j] for j in keep]
    groups, n_groups = _sorted_text_codes(frame[group])
    return _Design(
        y=y,
        X=X,
        names=names,
        columns=columns,
        levels=levels,
        groups=groups,
        n_groups=n_groups,
        reference=chosen,
        warnings=warnings,
        dropped_rows=dropped,
        reference_sources=sources,
        factors=factors,
    )


def _row_patterns(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Code of each row's distinct values (its covariate pattern), and the first row of each pattern."""
    pattern = np.zeros(X.shape[0], dtype=np.int64)
    for j in range(X.shape[1]):
        codes, uniques = pd.factorize(X[:, j])
        pattern = pd.factorize(pattern * len(uniques) + codes)[0].astype(np.int64)
    first = np.unique(pattern, return_index=True)[1]
    return pattern, first


def _independent_columns(X: np.ndarray) -> list[int]:
    """Indices of a maximal set of linearly independent columns, keeping earlier columns first.

    The ranks are taken on X's distinct rows, each scaled by the square root of its count: that
    matrix has X's Gram matrix, so X's singular values (the rank test's numbers, against the same
    tolerance), with one row per covariate pattern instead of one per annotation.
    """
    pattern, first = _row_patterns(X)
    distinct = X[first]
    weighted = distinct * np.sqrt(np.bincount(pattern, minlength=len(first)))[:, None]
    keep: list[int] = []
    for j in range(X.shape[1]):
        trial = [*keep, j]
        tolerance = 1e-8 * max(1.0, np.abs(distinct[:, trial]).max())
        if np.linalg.matrix_rank(weighted[:, trial], tol=tolerance) == len(keep) + 1:
            keep.append(j)
    return keep


def _cells(
    y: np.ndarray, X: np.ndarray, groups: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows collapsed to cells of one covariate pattern and one group: (X, group, rows, events) per cell.

    Every fixed effect is categorical, so the linear predictor takes one value per cell and the
    Bernoulli log-likelihood of a cell's rows is ``events * eta - rows * log(1 + exp(eta))``: the
    likelihood, its gradient and its curvature depend on the data only through these counts. A
    study of 100,000 annotations by 200 reviewers has a few thousand cells, so every evaluation of
    the fit works on those instead of on the rows (the numbers are the same sums, added in another
    order).
    """
    pattern = _row_patterns(X)[0]
    _, first, inverse = np.unique(pattern * n_groups + groups, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rows = np.bincount(inverse).astype(float)
    events = np.bincount(inverse, weights=y)
    return X[first], groups[first], rows, events


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
