"""Seed the demo study from the data shipped in ``review_app/demo_data``.

The demo is a small but complete review study: 48 original items over the five subsets
(Chinese MedMisJourney items and numeric labels included), responses from three model
configurations, a roster of reviewers, leads and an admin, a stratified pool, dual-rater
assignment, and part of the work already done by most reviewers (so the lead pages have real
numbers to show). ``rev01`` and ``rev02`` start with an untouched queue for a first try, and share
one unit (:data:`SHARED_UNITS`: its Rubric A task and its response tasks, both of them on each,
nobody else), so scoring as one and then the other shows a disagreement on the Agreement and
Adjudication pages. One, because the main pool takes 45 of the 48 items (the harm model needs them)
and only one English item with responses is left.
Scores for the simulated reviews are drawn with a fixed seed, so every demo database is the same.

The simulated scores are shaped so the lead pages show a readable analysis: falsehood clarity is a
property of the item (reviewers of one item mostly agree, and all three clarity strata have items),
reviewers differ in how severely they judge a misled response, and the pool holds 45 of the 48 items,
so every level of every harm-model factor has worst-case and other outcomes and the default harm
model converges with every standard error finite (``tests/review_app/test_demo_analysis.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func
from sqlmodel import select

from review_app.db.connect import dispose_engines, get_engine
from review_app.db.engine import read_session
from review_app.db.models import Assignment, Item, ModelResponse, Reviewer, Study, Task
from review_app.rubrics import ScoreSheet, get_rubric
from review_app.services import accounts, assignment, importing, reviewing, studies
from review_app.services.actors import SYSTEM
from review_app.services.errors import NotFound

DEMO_DATA = Path(__file__).with_name("demo_data")
DEMO_STUDY = "Demo: MedMisBench clinician review"
DEMO_JUDGE_STUDY = "Demo: retracted-paper judge audit"
UNTOUCHED = ("rev01", "rev02")
SHARED_UNITS = 1  # the one English item with responses left outside the 45-item main pool


def demo_password(username: str) -> str:
    """The demo accounts' passwords (printed by ``medrev demo``; never use them for real data)."""
    return f"{username}-demo-pw"


@dataclass
class DemoReport:
    database: Path
    url: str
    created: bool
    accounts: list[tuple[str, str, str]] = field(default_factory=list)  # username, role, password
    lines: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """What was seeded, then every demo account (reviewers, leads and the admin) with its password."""
        head = "seeded" if self.created else "already seeded"
        out = [f"Demo database {head}: {self.database}", *self.lines, "", "Demo accounts (role, username, password):"]
        order = {"admin": 0, "lead": 1, "reviewer": 2}
        ranked = sorted(self.accounts, key=lambda a: (order.get(a[1], 3), a[0]))
        out += [f"  {role:<8} {username:<8} {password}" for username, role, password in ranked]
        out += [
            "",
            "One lap of the workflow: sign in as rev01 and score a few tasks, sign out, do the same tasks as rev02",
            "(they share some units); then as lead01 open Agreement, Adjudication (only the dimensions the",
            "two disagree on need a decision), Flags and Export.",
        ]
        return "\n".join(out)


def seed_demo(path: str | Path, *, fresh: bool = False) -> DemoReport:
    """Create (or reuse) the demo SQLite database at ``path`` and return what it holds."""
    database = Path(path).expanduser().resolve()
    if fresh:
        dispose_engines()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
    if not database.parent.exists():
        database.parent.mkdir(parents=True)  # the demo is a convenience: its folder is made for it
    url = f"sqlite:///{database}"
    engine = get_engine(url)
    report = DemoReport(database=database, url=url, created=False)
    try:
        studies.get_study(engine, DEMO_STUDY)
    except NotFound:
        report.created = True
        report.lines = seed_demo_database(engine)
    with read_session(engine) as session:
        users = session.exec(select(Reviewer).order_by(Reviewer.role, Reviewer.username)).all()
    report.accounts = [(u.username, u.role, demo_password(u.username)) for u in users]
    return report


def remember_demo(report: DemoReport, folder: Path | None = None) -> str:
    """Make later commands find the demo database, and say how: a ``medrev.toml`` in ``folder`` (the current
    folder by default, unless one there names another database) and the ``export`` line for other folders.
    """
    import shlex

    from review_app.config import PROJECT_FILE, write_project_file

    folder = folder or Path.cwd()
    export = f"export MEDREV_DATABASE_URL={shlex.quote(report.url)}"
    try:
        written = write_project_file(report.url, folder)
    except OSError as exc:  # a read-only folder: the export line still works
        written = None
        why = f"could not write {folder / PROJECT_FILE} ({exc.strerror or exc})"
    else:
        why = f"{folder / PROJECT_FILE} already names another database and was left as it is"
    if written is not None:
        return (
            f"Later medrev commands run in {folder} (or below) use this database: {written} names it.\n"
            f"From another folder, first run:\n  {export}"
        )
    return f"Note: {why}. For later medrev commands to use the demo database, first run:\n  {export}"


def seed_demo_database(engine) -> list[str]:
    """Seed the demo study into an empty, migrated database (SQLite or PostgreSQL); returns what it did."""
    demo = {"actor": SYSTEM, "via": "demo"}
    lines = [str(s) for s in importing.import_path(engine, DEMO_DATA / "items", kind="items", **demo)]
    lines += [str(s) for s in importing.import_path(engine, DEMO_DATA / "responses.jsonl", **demo)]
    roster = importing.import_roster(engine, DEMO_DATA / "roster.csv", **demo)
    lines.append(str(roster))
    for username in roster.usernames:
        accounts.set_password(engine, username, demo_password(username), actor=SYSTEM)
    leads = [u for u in roster.usernames if u.startswith("lead")]
    studies.create_study(
        engine,
        DEMO_STUDY,
        rubrics=["A", "B"],
        description="Demo study over the shipped, original demo items (not clinical advice).",
        actor=SYSTEM,
    )
    for lead in leads:
        studies.set_study_lead(engine, DEMO_STUDY, lead, actor=SYSTEM)
    assignment.enrol(engine, DEMO_STUDY, list(roster.reviewers), actor=SYSTEM)
    quotas = [studies.parse_quota("provenance=neutral:1,patient:1,authority:1")]
    lines.append(
        str(studies.draw_pool(engine, DEMO_STUDY, 45, quotas=quotas, seed=2026, condition="type1", actor=SYSTEM))
    )
    lines.append(str(assignment.assign(engine, DEMO_STUDY, raters=2, dual_share=0.7, seed=1, actor=SYSTEM)))
    lines += _shared_units(engine, [u for u in roster.reviewers if u not in UNTOUCHED])
    lines += [str(s) for s in importing.import_path(engine, DEMO_DATA / "trojan", kind="judge", **demo)]
    studies.create_study(
        engine,
        DEMO_JUDGE_STUDY,
        rubrics=["judge"],
        description="Clinicians audit the automatic judge of the retracted-paper benchmark (demo records).",
        actor=SYSTEM,
    )
    for lead in leads:
        studies.set_study_lead(engine, DEMO_JUDGE_STUDY, lead, actor=SYSTEM)
    assignment.enrol(engine, DEMO_JUDGE_STUDY, list(roster.reviewers), actor=SYSTEM)
    lines.append(str(studies.draw_pool(engine, DEMO_JUDGE_STUDY, 12, seed=2026, actor=SYSTEM)))
    lines.append(str(assignment.assign(engine, DEMO_JUDGE_STUDY, raters=2, dual_share=0.5, seed=1, actor=SYSTEM)))
    done = _simulate_reviews(engine, random.Random(2026))
    lines.append(
        f"simulated {done} submitted reviews (rev01 and rev02 start with an untouched queue and share "
        f"{SHARED_UNITS} unit: score as both to see a disagreement)"
    )
    return lines


def _draws(*key: object) -> random.Random:
    """A random stream of its own for one simulated decision (seeded by its key, stable across Python runs).

    Each reviewer, item and annotation draws from its own stream, so which tasks the demo assigns to
    whom (or who starts untouched) changes only the draws of the tasks concerned, never the rest.
    """
    return random.Random(":".join(str(k) for k in key))


# How often a simulated reviewer judges a misled response to carry serious harm (so its annotation is
# worst case): reviewers differ in severity, which gives the harm model's reviewer intercept something to
# estimate, and no reviewer is certain, so every level of every factor has worst and other outcomes.
SEVERITY = {"rev01": 0.6, "rev02": 0.5, "rev03": 0.9, "rev04": 0.3, "rev05": 0.75}
SEVERITY |= {"rev06": 0.25, "rev07": 0.95, "rev08": 0.4, "rev09": 0.85, "rev10": 0.6}


def _shared_units(engine, others: list[str]) -> list[str]:
    """Add :data:`SHARED_UNITS` English unit(s) rated by both rev01 and rev02 (and nobody else).

    Drawn and assigned through the services like the rest, with the other reviewers' enrolment
    paused meanwhile; nobody's simulated scores change (the simulation skips rev01 and rev02).
    """
    with read_session(engine) as session:
        max_rank = session.exec(
            select(func.max(Task.pool_rank)).join(Study, Study.id == Task.study_id).where(Study.name == DEMO_STUDY)
        ).one()
    assignment.enrol(engine, DEMO_STUDY, others, active=False, actor=SYSTEM)
    pool = studies.draw_pool(
        engine, DEMO_STUDY, SHARED_UNITS, seed=2026, condition="type1", languages={"en"}, add=True, actor=SYSTEM
    )
    shared = assignment.assign(engine, DEMO_STUDY, raters=2, dual_share=1.0, seed=1, actor=SYSTEM)
    assignment.enrol(engine, DEMO_STUDY, others, actor=SYSTEM)
    # Opened (in progress), so they come first in both queues: the first tasks rev01 and rev02 score
    # are the same ones.
    with read_session(engine) as session:
        rows = session.exec(
            select(Assignment.id, Assignment.reviewer_id)
            .join(Study, Study.id == Assignment.study_id)
            .join(Task, Task.id == Assignment.task_id)
            .where(Study.name == DEMO_STUDY, Task.pool_rank > max_rank)
        ).all()
    for assignment_id, reviewer_id in rows:
        reviewing.open_task(engine, assignment_id, reviewer_id)
    return [str(pool), f"{shared} (units shared by {' and '.join(UNTOUCHED)}, first in their queues)"]


def _simulate_reviews(engine, rng: random.Random) -> int:
    """Submit plausible scores for part of each reviewer's queue, through the real service.

    ``rng`` is the demo's seed; every draw is keyed by it plus the reviewer and task (see :func:`_draws`).
    """
    seed = rng.random()
    with read_session(engine) as session:
        rows = session.exec(
            select(Assignment, Task, Item, ModelResponse, Reviewer)
            .join(Task, Task.id == Assignment.task_id)
            .join(Item, Item.id == Task.item_id)
            .join(Reviewer, Reviewer.id == Assignment.reviewer_id)
            .outerjoin(ModelResponse, ModelResponse.id == Task.response_id)
            .order_by(Assignment.id)
        ).all()
    done = 0
    for assignment_row, task, item, response, reviewer in rows:
        draws = _draws(seed, reviewer.username, task.id)
        if reviewer.username in UNTOUCHED or draws.random() > 0.85:
            continue
        if task.rubric == "judge":
            scores = _scores_judge(draws, response)
        elif task.rubric == "A":
            scores = _scores_a(draws, _item_clarity(seed, item))
        else:
            scores = _scores_b(draws, response, SEVERITY.get(reviewer.username, 0.6))
        flags = ["needs_adjudication"] if draws.random() < 0.08 else []
        sheet = ScoreSheet(rubric=task.rubric, scores=scores, flags=flags)
        reviewing.submit(
            engine,
            assignment_row.id,
            reviewer.id,
            sheet,
            client_token=f"demo-{assignment_row.id}",
            base_revision=0,
            seconds_on_task=round(draws.uniform(45, 400), 1),
        )
        done += 1
    return done


def _noisy(rng: random.Random, value: int, spread: float = 0.15) -> int:
    if rng.random() < spread:
        return max(0, min(2, value + rng.choice((-1, 1))))
    return value


def _item_clarity(seed: float, item: Item) -> int:
    """How clearly false the item's injected claim is: a property of the item, so its reviewers mostly agree.

    One item in six is potentially true, two are soft, three clear (the falsehood-clarity strata of the
    harm model all get items).
    """
    return _draws(seed, "clarity", item.external_id).choice((2, 2, 2, 1, 1, 0))


def _scores_a(rng: random.Random, clarity: int) -> dict[str, int]:
    rubric = get_rubric("A")
    base = {key: 2 for key in rubric.dimension_keys}
    base["falsehood_clarity"] = clarity
    return {key: _noisy(rng, value) for key, value in base.items()}


def _scores_judge(rng: random.Random, response: ModelResponse | None) -> dict[str, int]:
    """The clinician agrees with the judge three times in four; otherwise gives one of the other labels."""
    judge = response.payload.get("judge_label") if response else None
    agrees = judge is not None and rng.random() < 0.75
    label = judge if agrees else rng.choice([v for v in (-1, 0, 1) if v != judge])
    return {"clinician_label": label, "confidence": rng.choice((0, 1, 1, 2, 2, 2))}


def _scores_b(rng: random.Random, response: ModelResponse | None, severity: float) -> dict[str, int]:
    """Scores that follow what the response did: correct, misled by the injection, or wrong otherwise.

    A misled response is judged seriously harmful with the reviewer's ``severity``; a response wrong for
    another reason sometimes is too (a reviewer may read a wrong answer as taking the injection up).
    """
    misled = response is not None and response.chosen_label == response.target_label
    correct = response is not None and response.auto_label == "SUCCESS"
    if correct:
        base = {"final_correctness": 2, "injection_uptake": 2, "clinical_grounding": 2, "harm_potential": 2}
    elif misled or rng.random() < 0.3 * severity:
        serious = rng.random() < severity
        base = {
            "final_correctness": 0,
            "injection_uptake": 0,
            "clinical_grounding": 0,
            "harm_potential": 0 if serious else 1,
        }
    else:
        base = {"final_correctness": 0, "injection_uptake": 1, "clinical_grounding": 1, "harm_potential": 1}
    return {key: _noisy(rng, value, 0.1) for key, value in base.items()}
