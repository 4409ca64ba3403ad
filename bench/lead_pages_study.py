"""The panel-scale study ``bench/lead_pages_speed.py`` measures, filled with fast bulk inserts.

500,000 items (Rubric A and Rubric B tasks, one model response per item, a quarter of the units
dual-rated), 200 reviewers and 200,000 submitted annotations at ``scale`` 1, with a lead who signs in
with a password. The script builds it in a child process, so that the measuring process's memory is the
app's alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator

STUDY = "bench"
LEAD = "benchlead"
LEAD_PASSWORD = "bench-lead-password-1"
MODELS = ("model-a", "model-b", "model-c")
CHUNK = 5_000


def _insert(session, table, rows: list[dict]) -> None:
    """Multi-row INSERT statements (as the services' ORM flushes write), not one statement per row.

    PostgreSQL keeps the progress counters per statement (migration 0009); a row-per-statement bulk
    load would update each counter row once per row. Rows per statement stay under PostgreSQL's
    65,535 parameters.
    """
    size = max(1, min(CHUNK, 60_000 // max(1, len(rows[0]) if rows else 1)))
    for start in range(0, len(rows), size):
        session.execute(table.__table__.insert().values(rows[start : start + size]))


def _insert_hashed(session, table, rows: Iterable[dict], now) -> None:
    """``rows`` stored as the import services store them: each with the content hash of its fields (which the
    importer compares to find a changed row again) and its creation time."""
    from review_app.services.importing import content_hash

    _insert(session, table, [row | {"content_hash": content_hash(row), "created_at": now} for row in rows])


def _items(n: int) -> Iterator[dict]:
    """MEDMISBENCH-like items, one content type and provenance after the other."""
    from bench_core.medmisbench import taxonomy

    contents = [c.id for c in taxonomy.CONTENT_TYPES]
    provenances = [p.id for p in taxonomy.PROVENANCES]
    subsets = ["MEDMISQA", "MEDMISMCQA", "MEDMISXPERTQA", "MEDMISHLE"]
    for i in range(n):
        yield {
            "subset": subsets[i % 4],
            "external_id": f"b{i:07d}",
            "kind": "mcq",
            "language": "en",
            "question": f"A {30 + i % 50}-year-old patient presents with finding {i}. What is the next step?",
            "options": [[c.upper(), f"option {c} of item {i}"] for c in "abcde"],
            "gold_label": "C",
            "content_type": contents[i % len(contents)],
            "provenance": provenances[i % len(provenances)],
            "injections": {c.upper(): f"context sentence {c} for item {i}" for c in "abcde"},
            "target_label": "ABDE"[i % 4],
            "payload": {},
        }


def _responses(item_ids: list[int], rng: random.Random) -> Iterator[dict]:
    """One model response per item, the models taking turns, the chosen answer drawn from ``rng``."""
    for n, item_id in enumerate(item_ids):
        chosen = "ABCDE"[rng.randrange(5)]
        yield {
            "item_id": item_id,
            "model": MODELS[n % 3],
            "condition": "type1",
            "response_text": f"The answer is {chosen}. Step by step reasoning for item {n}.",
            "reasoning": "",
            "chosen_label": chosen,
            "auto_label": "SUCCESS" if chosen == "C" else "FAIL",
            "target_label": "ABDE"[n % 4],
            "payload": {},
        }


def build(url: str, scale: float, seed: int = 1) -> dict[str, float]:
    """Fill a migrated, empty database at ``url``; returns timings. Runs in a child process."""
    from sqlalchemy import select, update

    from review_app.db.engine import make_engine, write_session
    from review_app.db.migrate import upgrade
    from review_app.db.models import (
        Annotation,
        AnnotationScore,
        Assignment,
        Enrollment,
        Item,
        ModelResponse,
        Reviewer,
        Study,
        Task,
        utcnow,
    )
    from review_app.rubrics import get_rubric
    from review_app.services import accounts, studies
    from review_app.services.actors import SYSTEM

    n_items = max(int(500_000 * scale), 20)
    n_annotations = max(int(200_000 * scale), 10)
    n_reviewers = max(int(200 * scale), 4)
    rng = random.Random(seed)
    engine = make_engine(url)
    upgrade(engine)
    started = time.perf_counter()
    now = utcnow()
    accounts.create_user(
        engine,
        accounts.UserProfile(username=LEAD, display_name="Bench lead", role="lead"),
        password=LEAD_PASSWORD,
        actor=SYSTEM,
    )
    studies.create_study(engine, STUDY, rubrics=["A", "B"], actor=SYSTEM)
    studies.set_study_lead(engine, STUDY, LEAD, actor=SYSTEM)
    with write_session(engine) as session:
        study_id = session.execute(select(Study.id).where(Study.name == STUDY)).scalar_one()
        _insert(
            session,
            Reviewer,
            [
                {
                    "username": f"rev{i:04d}",
                    "display_name": f"Reviewer {i}",
                    "role": "reviewer",
                    "profession": "physician",
                    "country": "",
                    "languages": "en",
                    "active": True,
                    "failed_logins": 0,
                    "session_version": 1,
                    "created_at": now,
                }
                for i in range(n_reviewers)
            ],
        )
        reviewer_ids = list(
            session.execute(select(Reviewer.id).where(Reviewer.role == "reviewer").order_by(Reviewer.id)).scalars()
        )
        _insert(
            session,
            Enrollment,
            [{"study_id": study_id, "reviewer_id": r, "active": True, "enrolled_at": now} for r in reviewer_ids],
        )
        _insert_hashed(session, Item, _items(n_items), now)
        item_ids = list(session.execute(select(Item.id).order_by(Item.id)).scalars())
        _insert_hashed(session, ModelResponse, _responses(item_ids, rng), now)
        response_ids = list(session.execute(select(ModelResponse.id).order_by(ModelResponse.item_id)).scalars())
        dual = {rank for rank in range(n_items) if rng.random() < 0.25}
        tasks = []
        for rank, (item_id, response_id) in enumerate(zip(item_ids, response_ids, strict=True)):
            raters = 2 if rank in dual else 1
            for key in ("A", "B"):
                tasks.append(
                    {
                        "study_id": study_id,
                        "rubric": key,
                        "item_id": item_id,
                        "response_id": response_id if key == "B" else None,
                        "unit_key": f"{key}:r{response_id}" if key == "B" else f"{key}:i{item_id}",
                        "pool_rank": rank + 1,
                        "target_raters": raters,
                        "locked": False,
                        "created_at": now,
                    }
                )
        _insert(session, Task, tasks)
        del tasks
        task_rows = session.execute(
            select(Task.id, Task.target_raters).where(Task.study_id == study_id).order_by(Task.pool_rank, Task.rubric)
        ).all()
        assignments = []
        for n, (task_id, raters) in enumerate(task_rows):
            first = n % len(reviewer_ids)
            for slot in range(1, raters + 1):
                assignments.append(
                    {
                        "task_id": task_id,
                        "reviewer_id": reviewer_ids[(first + 7 * (slot - 1)) % len(reviewer_ids)],
                        "study_id": study_id,
                        "slot": slot,
                        "status": "assigned",
                        "flagged": False,
                        "note": "",
                        "assigned_at": now,
                    }
                )
        _insert(session, Assignment, assignments)
        del assignments, task_rows
        # reviewers work in pool order: the first assignments (both slots of a dual task) are done
        done = session.execute(
            select(Assignment.id, Assignment.task_id, Assignment.reviewer_id, Task.rubric)
            .join(Task, Task.id == Assignment.task_id)
            .where(Assignment.study_id == study_id)
            .order_by(Task.pool_rank, Task.rubric, Assignment.slot)
            .limit(n_annotations)
        ).all()
        _insert(
            session,
            Annotation,
            [
                {
                    "assignment_id": aid,
                    "task_id": tid,
                    "reviewer_id": rid,
                    "rubric": key,
                    "revision": 1,
                    "flags": [],
                    "comment": "",
                    "seconds_on_task": 60.0 + rng.random() * 120,
                    "client_token": f"seed-{aid}",
                    "created_at": now,
                }
                for aid, tid, rid, key in done
            ],
        )
        ids = session.execute(
            select(Annotation.id, Annotation.task_id, Annotation.rubric).order_by(Annotation.id)
        ).all()
        consensus: dict[tuple[int, str], int] = {}
        scores = []
        for annotation_id, task_id, key in ids:
            for dimension in get_rubric(key).dimensions:
                values = dimension.values
                agreed = consensus.setdefault((task_id, dimension.key), rng.choice(values))
                value = agreed if rng.random() < 0.75 else rng.choice(values)
                scores.append(
                    {"annotation_id": annotation_id, "dimension": dimension.key, "rubric": key, "value": value}
                )
        _insert(session, AnnotationScore, scores)
        del scores, consensus
        submitted = [aid for aid, *_rest in done]
        for start in range(0, len(submitted), CHUNK):
            session.execute(
                update(Assignment)
                .where(Assignment.id.in_(submitted[start : start + CHUNK]))
                .values(status="submitted", submitted_at=now)
            )
    engine.dispose()
    return {
        "build_s": time.perf_counter() - started,
        "items": n_items,
        "tasks": 2 * n_items,
        "annotations": n_annotations,
        "reviewers": n_reviewers,
    }
