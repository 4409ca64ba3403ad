"""What an agreement computation returns: one score's coefficients (:class:`AgreementResult`) and a
rubric's scores together (:class:`AgreementReport`), each summarising itself as text, a frame and JSON.

The coefficients are computed in :mod:`review_app.analysis.agreement`; ``docs/methods.md``
(Inter-rater agreement) defines them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else float(value)


def _label(value: float) -> str:
    return str(_number(value))


@dataclass(frozen=True)
class AgreementResult:
    """Agreement on one score (a rubric dimension or a binary outcome) across the analysed units."""

    score: str
    weights: str
    categories: tuple[float, ...]
    n_units: int
    n_raters: int
    n_ratings: int
    coefficient: float | None
    se: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    pa_weighted: float | None
    pe: float | None
    percent_agreement: float | None
    alpha_ordinal: float | None
    category_counts: dict[float, int]
    bootstrap_ci: tuple[float, float] | None = None
    n_boot: int = 0
    confidence: float = 0.95
    warnings: tuple[str, ...] = ()
    min_ratings: int = 2
    n_units_dropped: int = 0

    @property
    def coefficient_name(self) -> str:
        """AC1 with identity weights (unweighted), AC2 otherwise, as Gwet names them."""
        return "AC1" if self.weights == "identity" else "AC2"

    def to_dict(self) -> dict[str, object]:
        """The keys of ``medrev stats agreement --json`` (the command-line contract, plus added ones).

        With identity weights the coefficient is under ``ac1``; its SE and CI stay under the
        ``ac2_*`` names the contract lists and are repeated under ``ac1_*``.
        """
        key = self.coefficient_name.lower()
        data: dict[str, object] = {
            "n_units": self.n_units,
            "n_raters": self.n_raters,
            key: self.coefficient,
            "ac2_se": self.se,
            "ac2_ci_low": self.ci_low,
            "ac2_ci_high": self.ci_high,
            "percent_agreement": self.percent_agreement,
            "alpha_ordinal": self.alpha_ordinal,
            "category_counts": {_label(c): n for c, n in self.category_counts.items()},
            "min_ratings": self.min_ratings,
            "n_units_dropped": self.n_units_dropped,
        }
        if key == "ac1":
            data.update(ac1_se=self.se, ac1_ci_low=self.ci_low, ac1_ci_high=self.ci_high)
        data.update(
            score=self.score,
            coefficient_name=self.coefficient_name,
            weights=self.weights,
            categories=[_number(c) for c in self.categories],
            n_ratings=self.n_ratings,
            p_value=self.p_value,
            pa_weighted=self.pa_weighted,
            pe=self.pe,
            confidence=self.confidence,
            bootstrap_ci=list(self.bootstrap_ci) if self.bootstrap_ci else None,
            n_boot=self.n_boot,
            warnings=list(self.warnings),
        )
        return data

    def to_frame(self) -> pd.DataFrame:
        """One row, indexed by the score name."""
        row = {
            "coefficient_name": self.coefficient_name,
            "weights": self.weights,
            "min_ratings": self.min_ratings,
            "n_units": self.n_units,
            "n_units_dropped": self.n_units_dropped,
            "n_raters": self.n_raters,
            "n_ratings": self.n_ratings,
            "coefficient": self.coefficient,
            "se": self.se,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "boot_ci_low": self.bootstrap_ci[0] if self.bootstrap_ci else None,
            "boot_ci_high": self.bootstrap_ci[1] if self.bootstrap_ci else None,
            "percent_agreement": self.percent_agreement,
            "alpha_ordinal": self.alpha_ordinal,
        }
        for category, count in self.category_counts.items():
            row[f"n_score_{_label(category)}"] = count
        return pd.DataFrame([row], index=pd.Index([self.score], name="score"))

    def summary(self) -> str:
        level = round(self.confidence * 100)
        if self.coefficient is None:
            head = f"{self.score}: {self.coefficient_name} undefined"
        else:
            ci = "" if self.ci_low is None else f" ({level}% CI {self.ci_low:.3f} to {self.ci_high:.3f})"
            head = f"{self.score}: {self.coefficient_name} ({self.weights}) = {self.coefficient:.3f}{ci}"
        parts = [
            head,
            f"{self.n_units} units with >= {self.min_ratings} rating(s) ({self.n_units_dropped} with fewer set aside), "
            f"{self.n_raters} raters",
        ]
        if self.percent_agreement is not None:
            parts.append(f"agreement {self.percent_agreement * 100:.1f}%")
        if self.alpha_ordinal is not None:
            parts.append(f"ordinal alpha {self.alpha_ordinal:.3f}")
        usage = ", ".join(f"{_label(c)}: {n}" for c, n in self.category_counts.items())
        text = "; ".join(parts) + f"; scores used {usage}"
        if self.warnings:
            text += "".join(f"\n  warning: {w}" for w in self.warnings)
        return text

    def __str__(self) -> str:
        return self.summary()


@dataclass(frozen=True)
class AgreementReport:
    """Agreement for several scores of one rubric (dimensions and binary outcomes)."""

    rubric: str
    results: tuple[AgreementResult, ...]
    extra: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, score: str) -> AgreementResult:
        for result in self.results:
            if result.score == score:
                return result
        raise KeyError(f"no agreement result for {score!r}; scores: {', '.join(r.score for r in self.results)}")

    def to_frame(self) -> pd.DataFrame:
        """One row per score (rows built one by one: concatenating frames with all-missing bootstrap
        columns is deprecated in pandas and would change dtypes).

        The columns are the union over the scores, score counts in category order: dimensions of one
        rubric can have different scales (the judge audit's label is -1/0/1, its confidence 0/1/2), and
        taking the first score's columns would drop a category only a later score has (confidence 2).
        """
        if not self.results:
            return pd.DataFrame()
        frames = [r.to_frame() for r in self.results]
        rows = [frame.iloc[0] for frame in frames]
        columns = [c for c in frames[0].columns if not c.startswith("n_score_")]
        categories = sorted({c for r in self.results for c in r.category_counts})
        columns += [f"n_score_{_label(c)}" for c in categories]
        out = pd.DataFrame(rows, columns=columns)
        out.index.name = frames[0].index.name
        return out

    def to_dict(self) -> dict[str, object]:
        return {"rubric": self.rubric, "scores": {r.score: r.to_dict() for r in self.results}}

    def summary(self) -> str:
        lines = [f"Agreement, rubric {self.rubric}"]
        lines.extend("  " + r.summary().replace("\n", "\n  ") for r in self.results)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()
