"""Speed of the harm model's fit and data preparation against a baseline commit, in the same run.

The baseline's ``analysis/harm_model.py`` and ``analysis/rubric_b.py`` are read from git (default:
ce13c94, before the fit worked on covariate-pattern x reviewer cells) and run beside the working
tree's on the same data. Prints seconds for ``harm_model_data`` (the model's input table) and for the
fit, the ratios, and the largest differences of the estimates, SEs and variance (old vs new).

    PYTHONPATH=$PWD .venv/bin/python bench/harm_model_speed.py                 # simulated, 100,000 rows
    PYTHONPATH=$PWD .venv/bin/python bench/harm_model_speed.py --db sqlite:////path/study.db --study bench
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from analysis_speed import simulate  # noqa: E402

from review_app.analysis import rubric_b  # noqa: E402
from review_app.analysis.harm_model import fit_random_intercept_logit  # noqa: E402

FIXED = ["model", "content_type", "provenance", "stratum"]


def baseline_modules(rev: str) -> tuple[types.ModuleType, types.ModuleType]:
    """The baseline commit's harm_model and rubric_b, loaded as modules of their own."""

    def load(path: str, name: str, replace: tuple[str, str] | None = None) -> types.ModuleType:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
        ).stdout
        if replace:
            source = source.replace(*replace)
        module = types.ModuleType(name)
        module.__file__ = f"<{rev}:{path}>"
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # our own file at a commit
        return module

    harm = load("review_app/analysis/harm_model.py", "baseline_harm_model")
    rubric = load(
        "review_app/analysis/rubric_b.py",
        "baseline_rubric_b",
        ("review_app.analysis.harm_model import", "baseline_harm_model import"),
    )
    return harm, rubric


def timed(func):
    start = time.perf_counter()
    result = func()
    return result, time.perf_counter() - start


def compare(label: str, old, new) -> None:
    ea, eb = (np.array([t.estimate for t in r.terms]) for r in (old, new))
    sa, sb = (np.array([t.se for t in r.terms]) for r in (old, new))
    ok = np.isfinite(ea) & np.isfinite(eb)
    same_nan = bool(np.array_equal(np.isnan(ea), np.isnan(eb)))
    print(
        f"  {label}: max |estimate difference| {np.max(np.abs(ea - eb)[ok]):.1e} "
        f"({np.max(np.abs(ea - eb)[ok] / sa[ok]):.1e} SEs), max SE relative difference "
        f"{np.max(np.abs(sa - sb)[ok] / sa[ok]):.1e}, variance {old.group_variance:.6g} vs {new.group_variance:.6g}, "
        f"loglik difference {old.loglik - new.loglik:.1e}, same not-estimable terms {same_nan}, "
        f"same warnings {old.warnings == new.warnings}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="ce13c94", help="git revision of the old code (default ce13c94)")
    parser.add_argument("--db", help="database URL of a study (else a simulated one)")
    parser.add_argument("--study", default="bench")
    parser.add_argument("--tasks", type=int, default=50_000, help="simulated tasks (two ratings each)")
    parser.add_argument("--raters", type=int, default=200)
    args = parser.parse_args()
    old_harm, old_rubric = baseline_modules(args.baseline)

    if args.db:
        from review_app.db.connect import get_engine
        from review_app.services.cached_analyses import _study_facts
        from review_app.services.study_analysis import CLARITY
        from review_app.services.study_frames import study_frame

        engine = get_engine(args.db)
        frame, seconds = timed(lambda: study_frame(engine, args.study))
        print(f"study {args.study}: {len(frame)} annotations read in {seconds:.1f} s")
        if CLARITY not in frame.columns:
            frame = frame.assign(**{CLARITY: np.nan})
        _, options, first_model = _study_facts(engine, args.study)
        spec = {"first_model": first_model, "unrated": options.unrated, "penalty": options.penalty}
        spec["reference"] = dict(options.references)
        results = {}
        for name, module in (("old", old_rubric), ("new", rubric_b)):
            harm_spec = module.HarmModelSpec(**spec)
            data, t_data = timed(lambda harm_spec=harm_spec: harm_spec.data(frame))
            fit, t_fit = timed(lambda harm_spec=harm_spec, data=data: harm_spec.fit(data))
            summary, t_summary = timed(
                lambda module=module: module.summarise_rubric_b(frame, tie_rule=options.tie_rule)
            )
            results[name] = (data, fit, summary, t_data, t_fit, t_summary)
        (d0, f0, s0, *t0), (d1, f1, s1, *t1) = results["old"], results["new"]
        for k, what in enumerate(("harm_model_data", "harm model fit", "summarise_rubric_b")):
            print(f"{what:<22} old {t0[k]:6.2f} s   new {t1[k]:6.2f} s   ratio {t0[k] / t1[k]:5.1f}x")
        pd.testing.assert_frame_equal(d0, d1)
        pd.testing.assert_frame_equal(s0.tasks, s1.tasks)
        same = s0.rates == s1.rates and s0.strata == s1.strata and s0.warnings == s1.warnings
        print(f"  model input table identical; rubric B summary identical: {same}")
        compare("harm model", f0, f1)
        return

    data = simulate(args.tasks, args.raters)
    print(f"simulated: {len(data)} annotations, {data['rater'].nunique()} reviewers")
    for n_agq in (1, 5):
        old, t_old = timed(
            lambda n_agq=n_agq: old_harm.fit_random_intercept_logit(data, "worst_case", FIXED, "rater", n_agq=n_agq)
        )
        new, t_new = timed(
            lambda n_agq=n_agq: fit_random_intercept_logit(data, "worst_case", FIXED, "rater", n_agq=n_agq)
        )
        print(f"fit, n_agq={n_agq}: old {t_old:6.2f} s   new {t_new:6.2f} s   ratio {t_old / t_new:5.1f}x")
        compare(f"n_agq={n_agq}", old, new)


if __name__ == "__main__":
    main()
