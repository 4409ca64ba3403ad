"""Lead pages and reviewers at panel scale, on SQLite and PostgreSQL.

Builds a study of 500,000 items (Rubric A and Rubric B tasks, one model response per item, a quarter
of the units dual-rated), 200 reviewers and 200,000 submitted annotations with fast bulk inserts (in a
child process, so the figures below are the app's alone), then measures, server side:

- every lead page under Streamlit's AppTest with a signed-in lead: first load (a fresh session) and
  rerun (the same session again);
- ``medrev review export`` in a child process: wall time and peak RSS;
- the process starts as ``medrev app``'s server does (its start-up imports, frozen: ``medrev_asgi``; its
  settings: ``server.DEFAULTS`` and ``PROCESS_DEFAULTS`` where unset) and every page run ends as in the
  server: the app script's collection of the run's young objects (``session.collect_after_run``; the
  reviewers' runs here call the services, so they call it too), and Streamlit's full collection after a
  script run if ``runner.postScriptGC`` is on (AppTest makes none; ``medrev app`` turns it off:
  ``STREAMLIT_RUNNER_POST_SCRIPT_GC=true`` measures Streamlit's default); AppTest waits for each run
  as the server does, without its polling from the calling thread every millisecond
  (``MEDREV_BENCH_POLLING_WAIT=1`` keeps the polling), and compiles each script once, as the server
  does (``MEDREV_BENCH_COMPILE_EVERY_RUN=1`` keeps AppTest's compilation on every run);
- reviewers' submit-to-next (submit, fetch the next task, open its material) p95, idle and while a
  lead reloads the Agreement page in a loop in another thread of the same process (as in the app's
  server), in alternating blocks (``idle_and_with_lead``), and their ratio;
- the app process's RSS after all that; ``next_task`` p95; Progress right after the bulk import on a
  cold process (the bulk build ends as medrev's import, pool and assign services do: ``ANALYZE`` of
  the tables they wrote). Progress before that ANALYZE is printed too, as the baseline.

The last line is one JSON object: ``{"sqlite": {...}, "postgresql": {...}}`` with the keys
``<page>_first_load_s``, ``<page>_rerun_s`` per lead page, ``export_s``, ``export_rss_mb``,
``submit_p95_idle_ms``, ``submit_p95_with_lead_ms``, ``submit_p95_ratio``, ``app_rss_mb`` (the app
process and its compute workers: ``app_process_rss_mb`` + ``worker_rss_mb``, ``compute_workers`` of them),
``lead_quality_severity_s`` (from the Reviewers' quality page's first load to its severity columns,
computed in the background), ``next_task_p95_ms``, ``progress_after_import_s`` (and ``select1_p95_ms``, the
baseline of next task: ``SELECT 1`` through the same sessions, interleaved with it).

Targets: page rerun <= 1 s, first load <= 3 s, export <= 10 s, p95 with a lead <= 1.25x
idle, app RSS <= 600 MB, next task p95 <= 5 ms, Progress <= 0.5 s after a bulk import (PostgreSQL).

The study is built by ``bench/lead_pages_study.py``; the measuring is ``bench/lead_pages_measure.py``.

    .venv/bin/python bench/lead_pages_speed.py [--db sqlite|postgresql|both] [--scale 0.1]
    .venv/bin/python bench/lead_pages_speed.py --build sqlite:////tmp/lead.db --scale 0.25   # fill once
    .venv/bin/python bench/lead_pages_speed.py --use sqlite:////tmp/lead.db                   # measure it
    MEDREV_COMPUTE_WORKERS=0 .venv/bin/python bench/lead_pages_speed.py --use ...   # statistics in the app (baseline)
    STREAMLIT_RUNNER_POST_SCRIPT_GC=true .venv/bin/python bench/lead_pages_speed.py --use ...  # full GC per run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lead_pages_measure import measure
from lead_pages_study import build


def run(backend: str, scale: float, samples: int, include_pending: bool = False) -> dict[str, float]:
    from review_db_speed import bench_database

    with bench_database(backend, "medrev_lead_bench") as (workdir, url):
        # a child process builds the study, so this process's memory is the app's alone
        built = subprocess.run(
            [sys.executable, __file__, "--build", url, "--scale", str(scale)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        info = json.loads(built.stdout.strip().splitlines()[-1])
        print(
            f"\n== {backend}: {info['items']:,} items, {info['tasks']:,} tasks, {info['annotations']:,} "
            f"annotations, {info['reviewers']} reviewers (bulk build {info['build_s']:.1f} s)",
            flush=True,
        )
        return measure(url, backend, workdir, samples, include_pending)


def _as_the_app_process() -> None:
    """Run again under the settings ``medrev app`` gives its server (``DEFAULTS``, ``PROCESS_DEFAULTS``), if unset.

    This process stands in for the app's server (its AppTest sessions and reviewers' threads), so it
    runs under the same Streamlit settings (the collection after each run) and allocator settings
    (glibc reads them at start only).
    """
    from review_app.ui.server import DEFAULTS, PROCESS_DEFAULTS

    missing = {key: value for key, value in (DEFAULTS | PROCESS_DEFAULTS).items() if key not in os.environ}
    if missing:
        os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | missing)


def main() -> None:
    _as_the_app_process()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the study size (0.1: a quick check)")
    parser.add_argument(
        "--samples",
        type=int,
        default=600,
        help="submit-to-next samples of each kind (idle, with a lead) and next-task samples (a p95 of 200 moved "
        "by a third between runs of the same code)",
    )
    parser.add_argument("--build", metavar="URL", help="only fill the empty database at URL (migrated here)")
    parser.add_argument(
        "--use",
        metavar="URL",
        help="measure a database an earlier --build filled (it is not rebuilt; reviewers' submits stay in it)",
    )
    parser.add_argument(
        "--export-with-pending",
        action="store_true",
        help="also time the export with the pending tasks included (--include-pending; export_with_pending_s)",
    )
    args = parser.parse_args()
    if args.build:
        print(json.dumps(build(args.build, args.scale)))
        return
    if args.use:
        with tempfile.TemporaryDirectory() as tmp:
            backend = "postgresql" if args.use.startswith("postgresql") else "sqlite"
            print(
                json.dumps(
                    {backend: measure(args.use, backend, Path(tmp), args.samples, args.export_with_pending)},
                    sort_keys=True,
                )
            )
        return
    results = {}
    for backend in ("sqlite", "postgresql") if args.db == "both" else (args.db,):
        results[backend] = run(backend, args.scale, args.samples, args.export_with_pending)
    print(json.dumps(results, sort_keys=True))


if __name__ == "__main__":
    main()
