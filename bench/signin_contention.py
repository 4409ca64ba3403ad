"""Do failed sign-ins slow down reviewers' submits? (Sign-in must never stall the panel.)

A reviewer submits annotations through the real service while 20 threads keep failing to sign
in (unknown usernames, each attempt from a new address, so neither lock-out stops the argon2
work: the worst case for the server). Submit latency is measured in alternating blocks without
and with the attack in the same run; the figure is the ratio of the p95s (target: within 1.25x).
It also times failed sign-ins for an existing and an unknown username (they should cost the same).

Before the fix the sign-in held a write transaction while hashing, and 20 parallel attempts
stalled submits for 3-30 s with "database is locked".

    .venv/bin/python bench/signin_contention.py [--backend sqlite|postgres] [--submits 480] [--attackers 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from sqlmodel import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from review_db_speed import add_backend_option, chosen_backends, migrated_engine

from review_app.db.engine import read_session
from review_app.db.models import Assignment
from review_app.rubrics import RUBRIC_A, ScoreSheet
from review_app.services import accounts, assignment, authentication, importing, reviewing, studies
from review_app.services.actors import SYSTEM, Actor

SHEET = ScoreSheet(rubric="A", scores=dict.fromkeys(RUBRIC_A.dimension_keys, 2))
BLOCKS = 16  # alternating quiet / attack blocks


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def seed(engine, workdir: Path, n: int) -> tuple[Actor, list[int]]:
    import json

    path = workdir / "MEDMISQA.jsonl"
    with path.open("w") as handle:
        for i in range(n):
            row = {"id": f"s{i:05d}", "question": f"Question {i}?", "answer": "B"}
            row |= {f"op{c}": f"option {c}{i}" for c in "abcd"} | {f"inject{c}": f"context {c}{i}" for c in "abcd"}
            row |= {"injection_content": "relationship_inversion", "injection_provenance": "authority"}
            handle.write(json.dumps(row) + "\n")
    importing.import_items(engine, path, actor=SYSTEM)
    reviewer = accounts.create_user(
        engine,
        accounts.UserProfile(username="rev", display_name="Reviewer"),
        password="the reviewer's pw",
        actor=SYSTEM,
    )
    studies.create_study(engine, "bench", rubrics=["A"], actor=SYSTEM)
    studies.draw_pool(engine, "bench", n, seed=1, actor=SYSTEM)
    assignment.assign(engine, "bench", raters=1, actor=SYSTEM)
    with read_session(engine) as session:
        tasks = list(session.exec(select(Assignment.id).order_by(Assignment.id)))
    return Actor(reviewer.id, reviewer.session_version), tasks


class Attack:
    """``threads`` threads failing to sign in as fast as the server lets them, until stopped."""

    def __init__(self, engine, threads: int) -> None:
        self.engine, self.threads = engine, threads
        self.on = threading.Event()
        self.stop = threading.Event()
        self.attempts = 0
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._workers = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def _run(self, number: int) -> None:
        count = 0
        while not self.stop.is_set():
            if not self.on.wait(0.05):
                continue
            try:
                authentication.authenticate(
                    self.engine, f"ghost{number}x{count}", "not the password", client=f"10.{number}.{count % 250}.9"
                )
            except authentication.SigninBusy:
                pass
            except BaseException as exc:  # reported below
                self.errors.append(exc)
            count += 1
            with self._lock:
                self.attempts += 1

    def __enter__(self) -> Attack:
        for worker in self._workers:
            worker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for worker in self._workers:
            worker.join()


def measure(engine, reviewer: Actor, tasks: list[int], attackers: int) -> dict[str, list[float]]:
    quiet: list[float] = []
    loud: list[float] = []
    per_block = len(tasks) // BLOCKS
    attack_seconds = 0.0
    with Attack(engine, attackers) as attack:
        for block in range(BLOCKS):
            under_attack = block % 2 == 1
            if under_attack:
                attack.on.set()
                time.sleep(0.5)  # let the attack reach full speed
                started = time.perf_counter()
            for aid in tasks[block * per_block : (block + 1) * per_block]:
                begin = time.perf_counter()
                result = reviewing.submit(engine, aid, reviewer, SHEET, client_token=f"b{aid}", base_revision=0)
                (loud if under_attack else quiet).append(time.perf_counter() - begin)
                assert result.created
                time.sleep(0.01)  # a reviewer's pause; lets the attack run between submits
            if under_attack:
                attack_seconds += time.perf_counter() - started
                attack.on.clear()
                time.sleep(0.3)  # let the queued attempts drain before the next quiet block
        attempts = attack.attempts
    if attack.errors:
        raise RuntimeError(f"failed sign-ins raised: {attack.errors[:3]}")
    return {"quiet": quiet, "loud": loud, "rate": [attempts / max(attack_seconds, 1e-9)]}


def signin_costs(engine, rounds: int = 20) -> dict[str, list[float]]:
    costs: dict[str, list[float]] = {"existing username": [], "unknown username": []}
    for number in range(rounds):
        for label, username in (("existing username", "rev"), ("unknown username", f"nobody{number}")):
            begin = time.perf_counter()
            authentication.authenticate(engine, username, "not the password", client=f"192.0.2.{number}")
            costs[label].append(time.perf_counter() - begin)
    return costs


def run(backend: str, n_submits: int, attackers: int) -> None:
    with migrated_engine(backend) as (workdir, engine):
        reviewer, tasks = seed(engine, workdir, n_submits)
        print(f"\n== {backend}: {len(tasks)} submits in {BLOCKS} alternating blocks, {attackers} attackers")
        result = measure(engine, reviewer, tasks, attackers)
        quiet, loud = result["quiet"], result["loud"]
        ratio = p95(loud) / p95(quiet)
        print(f"   {'submit latency':<34} {'median ms':>10} {'p95 ms':>10}")
        print(
            f"   {'without failed sign-ins':<34} {1000 * statistics.median(quiet):10.1f} {1000 * p95(quiet):10.1f}"
        )
        print(
            f"   {f'with {attackers} parallel failed sign-ins':<34} "
            f"{1000 * statistics.median(loud):10.1f} {1000 * p95(loud):10.1f}"
        )
        print(f"   failed sign-ins during the attack: {result['rate'][0]:.1f}/s (every one hashed)")
        print(f"   p95 ratio with/without: {ratio:.2f} (target <= 1.25: {'met' if ratio <= 1.25 else 'MISSED'})")
        costs = signin_costs(engine)
        known, unknown = (statistics.median(costs[k]) for k in ("existing username", "unknown username"))
        print(
            f"   failed sign-in, median: existing username {1000 * known:.0f} ms, unknown {1000 * unknown:.0f} ms "
            f"(ratio {unknown / known:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_backend_option(parser, "sqlite")
    parser.add_argument("--submits", type=int, default=480)
    parser.add_argument("--attackers", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("MEDREV_LOCKOUT_ATTEMPTS", "100000")  # time the hashing, not the lock-out
    for backend in chosen_backends(args.backend):
        run(backend, args.submits, args.attackers)


if __name__ == "__main__":
    main()
