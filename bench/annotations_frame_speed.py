"""The annotations frame and the agreement on it: before and after, in one run.

Every Agreement/Analysis/Quality first load starts with the study's annotations frame, and the
Agreement page then computes agreement on it. This reads the frame of a study in a database filled
by ``bench/lead_pages_speed.py --build`` (or any medrev database) several times per round,
alternating between implementations:

* ``reference``: the typed rows, long-form scores and per-row ``_frame`` kept in
  ``tests/review_app/test_annotations_frame_equivalence.py`` (skip with ``--no-reference``: at
  500,000 items it takes tens of seconds);
* ``baseline``: ``review_app/services/annotations.py`` as it is at git revision ``--baseline``
  (default ``main``), and agreement with ``review_app/analysis/layout.py``'s ``numeric_scores`` of
  that revision;
* ``now``: this tree's :func:`review_app.services.annotations.load_annotations` and
  :func:`review_app.services.study_analysis.agreement_reports`.

It checks the frames are equal cell for cell and the agreement tables are equal (exactly), and
prints the medians and the ratios. Alternating rounds share whatever load the machine has, so the
ratios hold when absolute seconds do not. The database must be at this tree's migration head
(``medrev`` upgrades it; the baseline's queries run on it too).

    .venv/bin/python bench/lead_pages_speed.py --build sqlite:////tmp/lead.db --scale 0.25
    .venv/bin/python bench/annotations_frame_speed.py --use sqlite:////tmp/lead.db [--rounds 3] [--baseline main]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _module_at(revision: str, path: str, name: str):
    """The module ``path`` as it is at git ``revision`` of this repository (imports resolve to this tree)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:{path}"], check=True, capture_output=True, text=True
    ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, handle.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _numeric_scores(function: Callable) -> Iterator[None]:
    """Agreement computed with another ``numeric_scores`` (the analysis modules import it by name)."""
    from review_app.analysis import agreement_counts, rubric_a, rubric_b

    modules = (agreement_counts, rubric_a, rubric_b)
    saved = [module.numeric_scores for module in modules]
    for module in modules:
        module.numeric_scores = function
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.numeric_scores = original


def _timed(call: Callable):
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def _reference(session, study):
    from tests.review_app.test_annotations_frame_equivalence import reference_fetch, reference_frame

    return reference_frame(*reference_fetch(session, study))


def _read(engine, study_name: str, load: Callable, seconds: list[float]):
    """``load(session, study)`` in a snapshot session of its own, its time appended to ``seconds``; as the
    lead pages' shared frame reads it (``read_only=True``: the scores on a second connection meanwhile)
    where ``load`` takes that."""
    import inspect

    from review_app.db.engine import snapshot_session
    from review_app.services.annotations import get_study_row

    options = {"read_only": True} if "read_only" in inspect.signature(load).parameters else {}
    with snapshot_session(engine) as session:
        study = get_study_row(session, study_name)
        frame, took = _timed(partial(load, session, study, **options))
    seconds.append(took)
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--use", metavar="URL", required=True, help="a database bench/lead_pages_speed.py filled")
    parser.add_argument("--study", default="bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default="main", metavar="REV", help="git revision to compare with (main)")
    parser.add_argument("--no-reference", action="store_true", help="skip the per-row reference implementation")
    args = parser.parse_args()

    import pandas as pd

    from review_app.db.engine import make_engine, read_session
    from review_app.services.annotations import get_study_row, load_annotations
    from review_app.services.study_analysis import agreement_frame, agreement_reports

    old_annotations = _module_at(args.baseline, "review_app/services/annotations.py", "baseline_annotations")
    old_layout = _module_at(args.baseline, "review_app/analysis/layout.py", "baseline_layout")
    engine = make_engine(args.use)
    with read_session(engine) as session:
        rubrics = get_study_row(session, args.study).rubric_keys
    seconds: dict[str, list[float]] = {"reference": [], "baseline": [], "now": []}
    agreement_s: dict[str, list[float]] = {"baseline": [], "now": []}
    for _ in range(args.rounds):
        frames = {}
        if not args.no_reference:
            frames["reference"] = _read(engine, args.study, _reference, seconds["reference"])
        frames["baseline"] = _read(engine, args.study, old_annotations.load_annotations, seconds["baseline"])
        frames["now"] = _read(engine, args.study, load_annotations, seconds["now"])
        for name, frame in frames.items():
            pd.testing.assert_frame_equal(frame, frames["now"], check_exact=True, obj=name)
        with _numeric_scores(old_layout.numeric_scores):
            old_reports, took = _timed(partial(agreement_reports, frames["now"], rubrics))
        agreement_s["baseline"].append(took)
        new_reports, took = _timed(partial(agreement_reports, frames["now"], rubrics))
        agreement_s["now"].append(took)
        assert old_reports[1] == new_reports[1], "agreement notes differ from the baseline's"
        now_table, old_table = agreement_frame(new_reports[0]), agreement_frame(old_reports[0])
        pd.testing.assert_frame_equal(now_table, old_table, check_exact=True)
    median = {name: round(statistics.median(s), 3) for name, s in seconds.items() if s}
    agreement = {name: round(statistics.median(s), 3) for name, s in agreement_s.items()}
    figures = {
        "backend": engine.dialect.name,
        "rows": len(frames["now"]),
        "baseline": args.baseline,
        "frame_s": median,
        "agreement_s": agreement,
        "frame_and_agreement_s": {name: round(median[name] + agreement[name], 3) for name in agreement},
    }
    both = figures["frame_and_agreement_s"]
    figures["ratio_vs_baseline"] = round(both["baseline"] / both["now"], 2)
    print(f"{figures['backend']}: {figures['rows']:,} annotations in force (frames equal cell for cell)")
    for name in median:
        line = f"  {name:9} frame {median[name]:6.2f} s"
        if name in agreement:
            line += f"   agreement {agreement[name]:5.2f} s   together {both[name]:5.2f} s"
        print(line)
    print(f"  frame + agreement: {figures['ratio_vs_baseline']:.1f}x faster than {args.baseline}")
    if "reference" in median:
        figures["frame_ratio_vs_reference"] = round(median["reference"] / median["now"], 2)
    print(json.dumps(figures))
    engine.dispose()


if __name__ == "__main__":
    main()
