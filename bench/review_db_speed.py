"""How fast are "fetch my next task" and "submit an annotation" on a large review database?

Seeds 50,000 items, 100 reviewers, a 15,000-unit dual-rated Rubric A study (30,000 assignments)
and 20,000 submitted annotations, then times the reviewer's two hot paths through the real
services, on SQLite and on PostgreSQL. A trivial query through the same session machinery
(SELECT 1) is the baseline measured in the same run, so the ratios are comparable across
machines. Targets on this machine (SQLite): next task p95 < 20 ms, submit p95 < 30 ms.

    .venv/bin/python bench/review_db_speed.py [--backend sqlite|postgres|both] [--items 50000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, insert, select, text, update

from bench_core.medmisbench import taxonomy
from review_app.db.engine import make_engine, read_session, write_session
from review_app.db.migrate import upgrade
from review_app.db.models import Annotation, AnnotationScore, Assignment, Reviewer, utcnow
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import assignment, importing, review_queue, reviewing, studies
from review_app.services.actors import SYSTEM
from tests.postgres_admin import create_database, drop_database, pg_url


def write_items(path: Path, n: int) -> None:
    contents = [c.id for c in taxonomy.CONTENT_TYPES]
    provenances = [p.id for p in taxonomy.PROVENANCES]
    subsets = ["MEDMISQA", "MEDMISMCQA", "MEDMISXPERTQA", "MEDMISHLE"]
    with path.open("w") as handle:
        for i in range(n):
            row = {
                "id": f"b{i:06d}",
                "subset": subsets[i % 4],
                "question": f"A {30 + i % 50}-year-old patient presents with finding {i}. What is the next step?",
                "answer": "C",
                **{f"op{c}": f"option {c} of item {i}" for c in "abcde"},
                **{f"inject{c}": f"context sentence {c} for item {i}" for c in "abcde"},
                "injection_content": contents[i % 5],
                "injection_provenance": provenances[i % 3],
            }
            handle.write(json.dumps(row) + "\n")


def seed(engine, workdir: Path, n_items: int, *, pool: int = 15_000, annotations: int = 20_000) -> dict[str, float]:
    timings: dict[str, float] = {}
    path = workdir / "items.jsonl"
    write_items(path, n_items)
    start = time.perf_counter()
    importing.import_items(engine, path, actor=SYSTEM)
    timings["import items (s)"] = time.perf_counter() - start
    now = utcnow()
    with write_session(engine) as session:
        session.execute(
            insert(Reviewer),
            [
                {
                    "username": f"bench{i:03d}",
                    "display_name": f"Bench {i}",
                    "role": "reviewer",
                    "profession": "",
                    "country": "",
                    "languages": "en",
                    "active": True,
                    "failed_logins": 0,
                    "created_at": now,
                }
                for i in range(100)
            ],
        )
    studies.create_study(engine, "bench", rubrics=["A"], actor=SYSTEM)
    start = time.perf_counter()
    studies.draw_pool(engine, "bench", pool, seed=1, actor=SYSTEM)
    timings[f"draw pool of {pool:,} (s)"] = time.perf_counter() - start
    start = time.perf_counter()
    assignment.assign(engine, "bench", raters=2, dual_share=1.0, seed=1, actor=SYSTEM)
    timings[f"assign {2 * pool:,} slots (s)"] = time.perf_counter() - start
    with write_session(engine) as session:
        rows = session.execute(
            select(Assignment.id, Assignment.task_id, Assignment.reviewer_id).order_by(Assignment.id).limit(annotations)
        ).all()
        annotations = [
            {
                "assignment_id": aid,
                "task_id": tid,
                "reviewer_id": rid,
                "rubric": "A",
                "revision": 1,
                "flags": [],
                "comment": "",
                "seconds_on_task": 60.0,
                "client_token": f"seed-{aid}",
                "created_at": now,
            }
            for aid, tid, rid in rows
        ]
        for chunk in range(0, len(annotations), 2000):
            session.execute(insert(Annotation), annotations[chunk : chunk + 2000])
        ids = session.execute(select(Annotation.id, Annotation.assignment_id)).all()
        scores = [
            {"annotation_id": ann, "dimension": key, "rubric": "A", "value": 2}
            for ann, _aid in ids
            for key in RUBRIC_A.dimension_keys
        ]
        for chunk in range(0, len(scores), 5000):
            session.execute(insert(AnnotationScore), scores[chunk : chunk + 5000])
        session.execute(
            update(Assignment)
            .where(Assignment.id.in_(select(Annotation.assignment_id)))
            .values(status="submitted", submitted_at=now)
        )
    return timings


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(0.95 * (len(ordered) - 1))] * 1000


def measure(engine, n_samples: int) -> dict[str, tuple[float, float]]:
    with read_session(engine) as session:
        reviewer_ids = [r for (r,) in session.execute(select(Reviewer.id))]
    rng = random.Random(7)
    baseline, next_task, open_page, submit = [], [], [], []
    sheet = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 1))
    for n in range(n_samples):
        rid = rng.choice(reviewer_ids)
        start = time.perf_counter()
        with read_session(engine) as session:
            session.execute(text("SELECT 1")).scalar()
        baseline.append(time.perf_counter() - start)
        start = time.perf_counter()
        aid = review_queue.next_assignment(engine, rid)
        next_task.append(time.perf_counter() - start)
        if aid is None:
            continue
        start = time.perf_counter()
        reviewing.open_task(engine, aid, rid)
        open_page.append(time.perf_counter() - start)
        start = time.perf_counter()
        reviewing.submit(engine, aid, rid, sheet, client_token=f"bench-{n}", base_revision=0, seconds_on_task=30)
        submit.append(time.perf_counter() - start)
    return {
        "baseline SELECT 1": percentiles(baseline),
        "fetch my next task": percentiles(next_task),
        "open the task (material)": percentiles(open_page),
        "submit an annotation": percentiles(submit),
    }


@contextmanager
def bench_database(backend: str, name: str = "medrev_bench") -> Iterator[tuple[Path, str]]:
    """A scratch folder and an empty database for one run: a SQLite file in that folder for ``"sqlite"``,
    else a PostgreSQL database ``name`` that is dropped afterwards, so runs never see each other's rows.

    Yields the folder and the database URL; callers dispose their engines before the block ends.
    """
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if backend == "sqlite":
            yield workdir, f"sqlite:///{workdir / 'bench.db'}"
            return
        cleanup = create_database(name)
        try:
            yield workdir, pg_url(cleanup)
        finally:
            drop_database(cleanup)


@contextmanager
def migrated_engine(backend: str) -> Iterator[tuple[Path, Engine]]:
    """:func:`bench_database` with an engine on it, migrated to the app's schema; disposed at the end, so the
    database can be dropped."""
    with bench_database(backend) as (workdir, url):
        engine = make_engine(url)
        try:
            upgrade(engine)
            yield workdir, engine
        finally:
            engine.dispose()


def add_backend_option(parser: argparse.ArgumentParser, default: str) -> None:
    """``--backend sqlite|postgres|both``: the same figures on each database the app supports."""
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default=default)


def chosen_backends(choice: str) -> tuple[str, ...]:
    """The backends ``--backend`` names, SQLite first."""
    return ("sqlite", "postgres") if choice == "both" else (choice,)


def run_backend(backend: str, n_items: int, n_samples: int) -> None:
    with migrated_engine(backend) as (workdir, engine):
        print(f"\n== {backend}: seeding {n_items:,} items, 100 reviewers, 20,000 annotations")
        for label, seconds in seed(engine, workdir, n_items).items():
            print(f"   {label:<28} {seconds:8.2f}")
        results = measure(engine, n_samples)
        base = results["baseline SELECT 1"][0]
        print(f"   {'operation':<28} {'median ms':>10} {'p95 ms':>10} {'median/baseline':>16}")
        for label, (median, p95) in results.items():
            print(f"   {label:<28} {median:10.2f} {p95:10.2f} {median / base:16.1f}")
        if backend == "sqlite":
            next_ok = results["fetch my next task"][1] < 20
            submit_ok = results["submit an annotation"][1] < 30
            print(
                f"   targets: next task p95 < 20 ms {'met' if next_ok else 'MISSED'}; "
                f"submit p95 < 30 ms {'met' if submit_ok else 'MISSED'}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_backend_option(parser, "both")
    parser.add_argument("--items", type=int, default=50_000)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    for backend in chosen_backends(args.backend):
        run_backend(backend, args.items, args.samples)


if __name__ == "__main__":
    main()
