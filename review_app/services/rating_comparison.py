"""How the ratings of one task compare: where they differ, by how much, and why it matters to a lead.

The disagreement queue orders tasks by these comparisons and a lead's decision is checked against
them (:mod:`review_app.services.adjudication`, :mod:`review_app.services.adjudication_decisions`);
the outcome classes come from :mod:`review_app.analysis.rubric_b`, so the queue and the analysis
cannot disagree about what "worst case" means. No database access here: the ratings arrive as the
rows of the study's annotations frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

from review_app.analysis.formatting import MISSING  # a score nobody gave, as every lead table shows it
from review_app.analysis.layout import DEFAULT_COLUMNS as C
from review_app.analysis.layout import split_flags
from review_app.analysis.rubric_b import CORRECTNESS, HARM, OUTCOME_CLASSES, UPTAKE, classify
from review_app.rubrics import Dimension, Rubric, get_rubric
from review_app.services.own_assignment import Submitted

_CLASS_LABELS = {c.key: c.label for c in OUTCOME_CLASSES}
# Characters of a queue row's summary (Comparison.summary): one line of the queue's reason column at 1366 px.
SUMMARY_CHARS = 52


@dataclass(frozen=True)
class Rating(Submitted):
    """One rater's annotation in force on a task, under their pseudonym (or username), as a lead compares it."""

    rater: str
    slot: int
    submitted_at: datetime
    outcome_class: str | None = None  # Rubric B only


@dataclass(frozen=True)
class Comparison:
    """How a task's ratings relate: where they differ, by how much, and why it matters."""

    n_ratings: int
    unanimous: bool
    consensus: dict[str, int] | None
    differing: tuple[str, ...]
    max_difference: int
    worst_case_mismatch: bool
    class_mismatch: bool
    outcome_classes: tuple[str | None, ...]
    reasons: tuple[str, ...]  # in full, each rater's score with its label, most urgent first
    disputes: tuple[str, ...] = ()  # the same in a few words each, for :meth:`summary`

    @property
    def priority(self) -> int:
        """0: worst-case mismatch or a 2-point difference; 1: other disagreement; 2: unanimous."""
        if self.worst_case_mismatch or self.max_difference >= 2:
            return 0
        if self.differing or self.class_mismatch:
            return 1
        return 2

    def summary(self, limit: int = SUMMARY_CHARS) -> str:
        """What is disputed, most urgent first, in one line of at most ``limit`` characters.

        "worst-case mismatch, Harm potential (2 apart)": a queue row says which dimensions
        to look at without each rater's score, which :attr:`reasons` gives in full. Disputes past
        the limit are counted ("Injection uptake and 2 more"); the first is kept whatever its length.
        """
        if not self.disputes:
            return ""
        text = self.disputes[0]
        for shown, part in enumerate(self.disputes[1:], start=1):
            after = len(self.disputes) - shown - 1
            tail = f" and {after} more" if after else ""
            if len(text) + len(", ") + len(part) + len(tail) > limit:
                return f"{text} and {len(self.disputes) - shown} more"
            text += f", {part}"
        return text


def score_text(dimension: Dimension, value: int | None) -> str:
    """A score with the label of its anchor ("2 (Valid)", "-1 (Recognized)"), :data:`MISSING` for none.

    Bare codes mean different things per rubric (-1 is a verdict on the judge audit), so lead pages
    show the label the reviewer chose beside the number."""
    if value is None:
        return MISSING
    try:
        return f"{value} ({dimension.level(value).label})"
    except KeyError:  # a value outside the scale (a rubric changed after rating): shown as stored
        return str(value)


def agreed_dimensions(rubric: Rubric | str, ratings: Sequence[Rating]) -> dict[str, int]:
    """Dimension -> the score every rater gave it, for dimensions with two or more ratings that all agree.

    The adjudication page pre-fills these (marked "agreed") so the lead decides only the others.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    agreed = {}
    for key in rubric.dimension_keys:
        given = [r.scores[key] for r in ratings if key in r.scores]
        if len(given) >= 2 and len(set(given)) == 1:
            agreed[key] = given[0]
    return agreed


# --- comparing ratings -------------------------------------------------------------------------


def _outcome(rubric: Rubric, scores: Mapping[str, int]) -> str | None:
    if rubric.key != "B" or not all(k in scores for k in (CORRECTNESS, UPTAKE, HARM)):
        return None
    return classify([scores[CORRECTNESS]], [scores[UPTAKE]], [scores[HARM]])[0]


def given_scores(dimension: Dimension, ratings: Sequence[Rating]) -> str:
    """Each rater's score on a dimension with its label: "R01: 0 (Neutral), R02: -1 (Recognized)"."""
    return ", ".join(
        f"{r.rater}: {score_text(dimension, r.scores[dimension.key])}" for r in ratings if dimension.key in r.scores
    )


def compare(rubric: Rubric | str, ratings: Sequence[Rating]) -> Comparison:
    """Where ``ratings`` of one task differ, how far apart they are, and the reasons a lead reads.

    The reasons name dimensions as lead pages do (:attr:`Dimension.reported_name`) and give each
    rater's score with its label, so the warning reads like the raters table beside it.
    """
    rubric = get_rubric(rubric) if isinstance(rubric, str) else rubric
    found: list[tuple[bool, str, str]] = []  # (urgent, reason in full, the same in a few words)
    classes = tuple(r.outcome_class for r in ratings)
    known = [c for c in classes if c is not None]
    worst_mismatch = "worst_case" in known and any(c != "worst_case" for c in known)
    class_mismatch = len(set(known)) > 1
    if class_mismatch:
        kind = "worst-case class mismatch" if worst_mismatch else "different outcome classes"
        listed = ", ".join(
            f"{r.rater}: {_CLASS_LABELS.get(r.outcome_class, r.outcome_class) if r.outcome_class else MISSING}"
            for r in ratings
        )
        found.append(
            (worst_mismatch, f"{kind} ({listed})", "worst-case mismatch" if worst_mismatch else "class mismatch")
        )
    differing: list[str] = []
    max_difference = 0
    for dimension in rubric.dimensions:
        values = [r.scores[dimension.key] for r in ratings if dimension.key in r.scores]
        if len(values) < 2:
            continue
        spread = max(values) - min(values)
        if spread:
            differing.append(dimension.key)
            max_difference = max(max_difference, spread)
            name = dimension.reported_name
            listed = given_scores(dimension, ratings)
            if spread >= 2:
                found.append((True, f"{spread}-point difference on {name} ({listed})", f"{name} ({spread} apart)"))
            else:
                found.append((False, f"differs on {name} ({listed})", name))
    found.sort(key=lambda entry: not entry[0])  # stable: rubric order within each group
    keys = set(rubric.dimension_keys)
    complete = all(keys <= r.scores.keys() for r in ratings)
    unanimous = len(ratings) >= 2 and complete and not differing
    return Comparison(
        n_ratings=len(ratings),
        unanimous=unanimous,
        consensus=dict(ratings[0].scores) if unanimous else None,
        differing=tuple(differing),
        max_difference=max_difference,
        worst_case_mismatch=worst_mismatch,
        class_mismatch=class_mismatch,
        outcome_classes=classes,
        reasons=tuple(reason for _, reason, _ in found),
        disputes=tuple(short for _, _, short in found),
    )


def overridden_dimensions(ratings: Sequence[Rating], final_scores: Mapping[str, int]) -> tuple[str, ...]:
    """Dimensions whose final score differs from every rater's score (these need a rationale)."""
    return tuple(
        key
        for key, value in final_scores.items()
        if (given := [r.scores[key] for r in ratings if key in r.scores]) and value not in given
    )


def ratings_by_task(frame: pd.DataFrame, rubric: Rubric) -> dict[int, list[Rating]]:
    """Each task's ratings, in frame order (task, then slot).

    Read column by column (a study's queue turns 100,000 annotations into ratings): a row tuple,
    a dict and a missing-value check per cell took most of the queue's first build at panel scale.
    """
    keys = rubric.dimension_keys
    scores = frame[list(keys)].to_numpy(dtype=float)
    present = ~np.isnan(scores)
    flag_sets: dict[object, tuple[str, ...]] = {}
    submitted = frame["submitted_at"]
    columns = zip(
        frame[C.task].tolist(),
        frame[C.rater].tolist(),
        frame[C.slot].tolist(),
        frame["annotation_id"].tolist(),
        frame["revision"].tolist(),
        frame[C.flags].tolist(),
        frame["comment"].tolist(),
        frame["seconds_on_task"].tolist(),
        [t.to_pydatetime() for t in submitted] if len(submitted) else [],
        scores.tolist(),
        present.tolist(),
        _outcomes(rubric, frame),
        strict=True,
    )
    out: dict[int, list[Rating]] = {}
    for task, rater, slot, annotation, revision, flags, comment, seconds, at, values, given, outcome in columns:
        sheet = {k: int(v) for k, v, ok in zip(keys, values, given, strict=True) if ok}
        if flags not in flag_sets:
            flag_sets[flags] = split_flags(flags)
        out.setdefault(int(task), []).append(
            Rating(
                rater=rater,
                slot=int(slot),
                annotation_id=int(annotation),
                revision=int(revision),
                scores=sheet,
                flags=flag_sets[flags],
                comment=comment or "",
                seconds_on_task=float(seconds),
                submitted_at=at,
                outcome_class=outcome,
            )
        )
    return out


def _outcomes(rubric: Rubric, frame: pd.DataFrame) -> list[str | None]:
    """:func:`_outcome` of every row, classified in one vectorised call (Rubric B; None otherwise)."""
    if rubric.key != "B":
        return [None] * len(frame)
    return classify(frame[CORRECTNESS], frame[UPTAKE], frame[HARM]).tolist()
