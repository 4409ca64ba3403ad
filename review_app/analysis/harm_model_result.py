"""What a harm-model fit returns: its terms, their odds ratios and the ways to print and refit it.

:class:`Penalty` names the fit's objective (maximum likelihood or the opt-in normal prior),
:class:`Term` one coefficient and :class:`HarmModelResult` the whole fit, which summarises itself
as text, a frame, the JSON of ``medrev stats harm-model --json``, and the R and ``medrev`` calls
that refit it. The estimation itself is :mod:`review_app.analysis.harm_model`; the methods are
described in ``docs/methods.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from review_app.analysis.layout import AnalysisInputError
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

    @property
    def not_estimable_note(self) -> str:
        """``not estimable (why)``: how every printed table names a term without an estimate and SE."""
        return f"not estimable ({self.separation or 'no standard error'})"

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
        """The JSON of ``medrev stats harm-model --json``: the fit, its terms and why any term is not estimable."""
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
                note = t.not_estimable_note
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
                lines.append(f"  {t.name:<40} {t.not_estimable_note}")
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


def _r_string(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'
