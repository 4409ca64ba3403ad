"""How well the automatic judge of the retracted-paper benchmark agrees with clinicians.

Every clinician annotation of a judge-audit task is paired with the judge's label on the same
trace: agreement is Gwet's AC1 over the three labels (recognized -1, neutral 0, polluted 1) with
the judge and the clinician as the two raters of each pair, plus percent agreement, a confusion
table, and the cases where they disagree (the ones a lead reads first). Traces the judge left
flagged (no label) are counted separately, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import Engine
from sqlmodel import select

from review_app.analysis import AgreementResult, wilson
from review_app.analysis.agreement import agreement
from review_app.db.engine import read_session
from review_app.db.models import Item, ModelResponse, Task
from review_app.rubrics import get_rubric
from review_app.services import studies
from review_app.services.actors import SYSTEM, Actor
from review_app.services.annotations import annotations_frame, get_study_row

LABELS: dict[int, str] = {-1: "recognized", 0: "neutral", 1: "polluted"}


@dataclass(frozen=True)
class JudgeAuditSummary:
    """Judge versus clinicians on one judge-audit study."""

    study: str
    n_pairs: int  # clinician annotations whose trace has a judge label
    n_flagged: int  # clinician annotations of traces the judge left flagged
    agreement: AgreementResult | None
    percent_agreement: float | None
    confusion: pd.DataFrame  # rows: clinician label, columns: judge label (counts)
    disagreements: pd.DataFrame
    # one row per level of the rubric's confidence scale (used or not): n paired annotations, k agreeing, Wilson CI
    by_confidence: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary(self) -> str:
        if self.agreement is None:
            return f"{self.study}: no clinician label on a judged trace yet ({self.n_flagged} on flagged traces)"
        a = self.agreement
        return (
            f"{self.study}: judge vs clinicians on {self.n_pairs} annotations: AC1 {a.coefficient:.3f} "
            f"(95% CI {a.ci_low:.3f} to {a.ci_high:.3f}), exact agreement {self.percent_agreement:.1%}; "
            f"{len(self.disagreements)} disagreement(s); {self.n_flagged} annotation(s) on flagged traces"
        )


def judge_audit_summary(
    engine: Engine, study_name: str, *, pseudonymise: bool = True, actor: Actor = SYSTEM
) -> JudgeAuditSummary:
    """The automatic judge against the clinicians' labels; ``actor`` must lead the study."""
    studies.check_lead_of(engine, study_name, actor=actor)
    frame = annotations_frame(engine, study_name, rubric="judge", pseudonymise=pseudonymise)
    with read_session(engine) as session:
        study = get_study_row(session, study_name)
        judged = session.exec(
            select(Task.id, ModelResponse.payload, Item.external_id, Item.payload)
            .join(ModelResponse, ModelResponse.id == Task.response_id)
            .join(Item, Item.id == Task.item_id)
            .where(Task.study_id == study.id, Task.rubric == "judge")
        ).all()
    judge = {task_id: payload.get("judge_label") for task_id, payload, _e, _p in judged}
    titles = {task_id: (external, item_payload.get("title", "")) for task_id, _r, external, item_payload in judged}
    frame = frame[frame["clinician_label"].notna()].copy()
    frame["judge_label"] = frame["task_id"].map(judge)
    flagged = frame[frame["judge_label"].isna()]
    pairs = frame[frame["judge_label"].notna()].copy()
    pairs["clinician_label"] = pairs["clinician_label"].astype(int)
    pairs["judge_label"] = pairs["judge_label"].astype(int)
    order = list(LABELS)
    confusion = pd.crosstab(
        pd.Categorical(pairs["clinician_label"].map(LABELS), categories=[LABELS[k] for k in order]),
        pd.Categorical(pairs["judge_label"].map(LABELS), categories=[LABELS[k] for k in order]),
        rownames=["clinician"],
        colnames=["judge"],
        dropna=False,
    )
    names = [LABELS[k] for k in order]
    confusion = pd.DataFrame(confusion.to_numpy(), index=pd.Index(names, name="clinician \\ judge"), columns=names)
    by_confidence = agreement_by_confidence(pairs)
    if pairs.empty:
        return JudgeAuditSummary(study_name, 0, len(flagged), None, None, confusion, pd.DataFrame(), by_confidence)
    long = pd.concat(
        [
            pd.DataFrame({"unit": pairs["annotation_id"], "who": "judge", "label": pairs["judge_label"]}),
            pd.DataFrame({"unit": pairs["annotation_id"], "who": "clinician", "label": pairs["clinician_label"]}),
        ]
    )
    result = agreement(long, "label", unit="unit", rater="who", weights="identity", categories=order)
    differ = pairs[pairs["clinician_label"] != pairs["judge_label"]]
    disagreements = pd.DataFrame(
        {
            "task_id": differ["task_id"],
            "record": [titles[t][0] for t in differ["task_id"]],
            "title": [titles[t][1] for t in differ["task_id"]],
            "judge": differ["judge_label"].map(LABELS),
            "clinician": differ["clinician_label"].map(LABELS),
            "confidence": differ["confidence"].astype("Int64"),
            "rater": differ["rater"],
            "comment": differ["comment"],
        }
    ).reset_index(drop=True)
    exact = float((pairs["clinician_label"] == pairs["judge_label"]).mean())
    return JudgeAuditSummary(
        study_name, len(pairs), len(flagged), result, exact, confusion, disagreements, by_confidence
    )


def verdict_names() -> dict[str, str]:
    """The judge's label keys (``recognized``, ``neutral``, ``polluted``) as the rubric names them for a reader
    (Recognized, Neutral, Polluted): the headers and cells of every table that crosses judge and clinician."""
    levels = get_rubric("judge").dimension("clinician_label").levels
    return {LABELS[level.value]: level.label for level in levels}


def confidence_levels() -> list[tuple[int, str]]:
    """The judge rubric's confidence scale, every level in order: the categories of any confidence table or chart.

    Taken from the rubric, never from the data, so a level nobody has used yet (or one a chart's
    category list would otherwise miss) still has its row or bar.
    """
    return [(level.value, level.label) for level in get_rubric("judge").dimension("confidence").levels]


def agreement_by_confidence(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per confidence level of the scale: paired annotations, how many agree with the judge, Wilson 95% CI."""
    rows = []
    for value, label in confidence_levels():
        at = pairs[pd.to_numeric(pairs["confidence"], errors="coerce") == value] if len(pairs) else pairs
        k = int((at["clinician_label"] == at["judge_label"]).sum()) if len(at) else 0
        p = wilson(k, len(at))
        rows.append(
            {
                "confidence": value,
                "confidence_label": label,
                "n": len(at),
                "k": k,
                "rate": p.rate,
                "ci_low": p.ci_low,
                "ci_high": p.ci_high,
            }
        )
    return pd.DataFrame(rows, columns=["confidence", "confidence_label", "n", "k", "rate", "ci_low", "ci_high"])
