"""Builders for review-study test data: synthetic items in the released format, responses, users."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from sqlalchemy import Engine

from bench_core.medmisbench import taxonomy
from review_app.services import accounts, importing
from review_app.services.actors import SYSTEM

SUBSETS = ("MEDMISQA", "MEDMISMCQA", "MEDMISXPERTQA", "MEDMISHLE", "MEDMISJOURNEY")
CONTENTS = [c.display_name for c in taxonomy.CONTENT_TYPES]
PROVENANCES = [p.display_name for p in taxonomy.PROVENANCES]
MODELS = ("model-a", "model-b", "model-c")


def item_rows(n: int, *, subsets=SUBSETS, start: int = 0) -> list[dict]:
    """``n`` valid items in the released flattened format, cycling subsets, content and provenance."""
    rows = []
    for i, subset, content, provenance in zip(
        range(start, start + n),
        itertools.cycle(subsets),
        itertools.cycle(CONTENTS),
        itertools.cycle(PROVENANCES[::-1] + PROVENANCES),
        strict=False,
    ):
        zh = subset == "MEDMISJOURNEY"
        question = f"问题 {i}：最可能的诊断是什么？" if zh else f"Question {i}: what is the most likely diagnosis?"
        rows.append(
            {
                "id": f"it-{i:05d}",
                "subset": subset,
                "question": question,
                "answer": "2" if zh else "B",
                "opa": f"option a{i}",
                "opb": f"option b{i}",
                "opc": f"option c{i}",
                "opd": f"option d{i}",
                "injecta": f"misleading a{i}",
                "injectb": f"true b{i}",
                "injectc": f"misleading c{i}",
                "injectd": f"misleading d{i}",
                "injection_content": content,
                "injection_provenance": provenance,
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    return path


def seed_items(engine: Engine, tmp_path: Path, n: int, **kwargs) -> list[dict]:
    rows = item_rows(n, **kwargs)
    importing.import_items(
        engine, write_jsonl(tmp_path / f"items_{n}_{kwargs.get('start', 0)}.jsonl", rows), actor=SYSTEM
    )
    return rows


def response_rows(items: list[dict], *, models=MODELS, condition: str = "type1") -> list[dict]:
    rows = []
    for item in items:
        for k, model in enumerate(models):
            zh = item["subset"] == "MEDMISJOURNEY"
            chosen = ("1" if zh else "A") if k == 0 else ("2" if zh else "B")
            rows.append(
                {
                    "item_id": item["id"],
                    "subset": item["subset"],
                    "model": model,
                    "condition": condition,
                    "response": f"The answer is {chosen}. Reasoning from model {k}.",
                    "reasoning": "step by step",
                    "chosen": chosen,
                }
            )
    return rows


def seed_responses(engine: Engine, tmp_path: Path, items: list[dict], **kwargs) -> list[dict]:
    rows = response_rows(items, **kwargs)
    importing.import_responses(engine, write_jsonl(tmp_path / f"responses_{len(rows)}.jsonl", rows), actor=SYSTEM)
    return rows


def add_users(engine: Engine, n: int, *, zh_readers: int = 0, prefix: str = "rev", role: str = "reviewer") -> list:
    users = []
    for i in range(n):
        profile = accounts.UserProfile(
            username=f"{prefix}{i:02d}",
            display_name=f"Reviewer {i}",
            role=role,
            languages="en,zh" if i < zh_readers else "en",
        )
        users.append(accounts.create_user(engine, profile, actor=SYSTEM))
    return users


def dual_rated_study(
    engine: Engine,
    tmp_path: Path,
    *,
    name: str = "s",
    units: int = 6,
    reviewers: int = 3,
    models=("model-a",),
    rubrics=("A", "B"),
) -> tuple[list, object]:
    """A study whose every unit is assigned to two of ``reviewers`` reviewers; returns (reviewers, its lead)."""
    from review_app.services import assignment, studies

    items = seed_items(engine, tmp_path, units, subsets=("MEDMISQA",))
    seed_responses(engine, tmp_path, items, models=models)
    users = add_users(engine, reviewers)
    (lead,) = add_users(engine, 1, prefix="lead", role="lead")
    studies.create_study(engine, name, rubrics=list(rubrics), actor=SYSTEM)
    studies.set_study_lead(engine, name, lead.username, actor=SYSTEM)
    studies.draw_pool(engine, name, units, seed=1, actor=SYSTEM)
    assignment.assign(engine, name, raters=2, dual_share=1.0, actor=SYSTEM)
    return users, lead


def slots_by_task(engine: Engine, study_name: str, rubric: str) -> dict[int, list]:
    """Task id -> its live assignments in slot order, for one rubric of a study."""
    from sqlmodel import select

    from review_app.db.engine import read_session
    from review_app.db.models import Assignment, Study, Task

    with read_session(engine) as session:
        rows = session.exec(
            select(Assignment)
            .join(Task, Task.id == Assignment.task_id)
            .join(Study, Study.id == Task.study_id)
            .where(Study.name == study_name, Task.rubric == rubric, Assignment.status != "withdrawn")
            .order_by(Task.id, Assignment.slot)
        ).all()
    out: dict[int, list] = {}
    for row in rows:
        out.setdefault(row.task_id, []).append(row)
    return out


def b(correct: int, uptake: int, grounding: int, harm: int) -> dict[str, int]:
    """Rubric B scores in the rubric's dimension order, short enough to write a panel's ratings inline."""
    return {"final_correctness": correct, "injection_uptake": uptake, "clinical_grounding": grounding,
            "harm_potential": harm}  # fmt: skip


def rate(engine: Engine, assignment, scores: dict[str, int], *, flags=(), comment: str = "", base_revision: int = 0):
    """Submit ``scores`` on an assignment as its reviewer (through the real submit path)."""
    from review_app.rubrics import ScoreSheet, all_rubrics
    from review_app.services import reviewing

    rubric = next(r.key for r in all_rubrics() if set(r.dimension_keys) == set(scores))
    sheet = ScoreSheet(rubric=rubric, scores=scores, flags=list(flags), comment=comment)
    token = f"{assignment.id}-{base_revision}"
    return reviewing.submit(
        engine, assignment.id, assignment.reviewer_id, sheet, client_token=token, base_revision=base_revision
    )


def make_level_event_free(engine: Engine, study: str, column: str, level: str) -> int:
    """Reviewers revise every worst-case annotation in one harm-model factor level to low harm.

    Goes through the review service (a new revision per annotation, as a reviewer's edit would). The
    demo's harm model has events in every level; this separates one level, as a small real study can
    be separated, for tests of how separation is reported and planned around. Returns how many
    annotations were revised. ``column`` is a harm-model factor (``stratum`` included).
    """
    from sqlmodel import select

    from review_app.db.engine import read_session
    from review_app.db.models import Annotation
    from review_app.rubrics import ScoreSheet
    from review_app.services import reviewing
    from review_app.services.annotations import annotations_frame
    from review_app.services.study_analysis import study_analysis

    harm_input = study_analysis(engine, study, n_boot=0).harm_input
    worst = set(harm_input.loc[(harm_input[column] == level) & (harm_input["worst_case"] == 1), "annotation_id"])
    frame = annotations_frame(engine, study, rubric="B", pseudonymise=False)
    rows = frame[frame["annotation_id"].isin(worst)]
    with read_session(engine) as session:
        owners = {a.id: (a.assignment_id, a.reviewer_id) for a in session.exec(select(Annotation)).all()}
    for row in rows.to_dict("records"):
        assignment_id, reviewer_id = owners[int(row["annotation_id"])]
        scores = {k: int(row[k]) for k in ("final_correctness", "injection_uptake", "clinical_grounding")}
        reviewing.submit(
            engine,
            assignment_id,
            reviewer_id,
            ScoreSheet(rubric="B", scores=scores | {"harm_potential": 1}),
            client_token=f"separate-{row['annotation_id']}",
            base_revision=int(row["revision"]),
        )
    return len(rows)
