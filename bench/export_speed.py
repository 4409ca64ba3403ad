"""``medrev review export`` at full scale against a baseline commit, in the same run.

Runs the export command in a child process for the baseline tree (``--baseline``, a git ref, checked
out with ``git archive`` into a temporary folder) and for this tree, alternately, ``--repeat`` times
each, and prints per run: wall seconds, CPU seconds (user + system of the command and of the compute
worker it starts), peak RSS of the command process (``wait4``: the largest of the process and its
worker) and peak RSS of the process tree (the command and its worker, sampled every 0.1 s). Then
it compares the two exports: every file byte for byte (sha256), and ``manifest.json`` without its
snapshot time. The machine is shared: compare the ratios of one run, not figures across runs.

``--stages`` instead measures where this tree's export spends its CPU, one stage after the other in
this process (CPU seconds, which a busy machine distorts less than wall time): the annotations frame
read, agreement, the Rubric A summary (its bootstrap's multinomial draws and its matrix products
apart), Rubric B, the harm model, and the labels streaming (database read, table building, and each
format's writing).

    .venv/bin/python bench/export_speed.py --db sqlite:////work/benchdb/full_export.db [--study bench]
        [--baseline 7622e9a] [--repeat 1]
    .venv/bin/python bench/export_speed.py --db sqlite:////work/benchdb/full_export.db --stages

The database must hold the study (``bench/lead_pages_speed.py --build`` makes one). The export's
audit record is written to it (one row per run). The last line is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB (0 for processes that are gone)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                total += next((int(line.split()[1]) for line in status if line.startswith("VmRSS:")), 0)
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    stack.extend(int(child) for child in children.read().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total / 1024


def run_export(tree: Path, url: str, study: str, out: Path) -> dict[str, float]:
    """One ``python -m review_app review export`` with ``tree`` first on the path: its figures."""
    env = os.environ | {"MEDREV_DATABASE_URL": url, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "review_app", "review", "export", "--study", study, "--out", str(out)]
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss_mb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    error = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export with {tree} failed:\n{error[-2000:]}")
    return {
        "wall_s": round(seconds, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "tree_peak_rss_mb": round(peak[0], 1),
    }


def _digests(folder: Path) -> dict[str, str]:
    digests = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "manifest.json":
            digests[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def _manifest(folder: Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("snapshot_utc")
    return manifest


def compare(baseline: Path, current: Path) -> list[str]:
    """What differs between two exports (empty: the same files, byte for byte, and the same manifest)."""
    old, new = _digests(baseline), _digests(current)
    problems = [f"{name}: only in one export" for name in sorted(set(old) ^ set(new))]
    problems += [f"{name}: bytes differ" for name in sorted(set(old) & set(new)) if old[name] != new[name]]
    if _manifest(baseline) != _manifest(current):
        problems.append("manifest.json differs beyond snapshot_utc")
    return problems


def stages(url: str, study_name: str) -> dict[str, float]:
    """CPU seconds of each stage of this tree's export, run one after the other in this process."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from review_app.analysis.bootstrap import _distinct_rows
    from review_app.analysis.layout import select_rubric
    from review_app.analysis.rubric_a import COMPOSITE, summarise_rubric_a, task_means
    from review_app.analysis.rubric_b_summary import summarise_rubric_b
    from review_app.db.engine import make_engine
    from review_app.rubrics import RUBRIC_A, get_rubric
    from review_app.services.adjudication_decisions import latest_adjudications
    from review_app.services.analysis_options import AnalysisOptions, first_model
    from review_app.services.annotations import adjudicator_labels, get_study_row, load_annotations
    from review_app.services.export import files as export_files
    from review_app.services.export import snapshot as export_snapshot
    from review_app.services.export.labels import LabelsBuilder, labels_width
    from review_app.services.study_analysis import agreement_reports, harm_model, is_pending, rated_counts

    cpu: dict[str, float] = {}

    def timed(name: str, call):
        start = time.process_time()
        value = call()
        cpu[name] = cpu.get(name, 0.0) + time.process_time() - start
        return value

    engine = make_engine(url)
    with export_snapshot.snapshot_session(engine) as session, tempfile.TemporaryDirectory() as tmp:
        study = get_study_row(session, study_name)
        frame = timed("frame read", lambda: load_annotations(session, study, pseudonymise=True))
        options, model = AnalysisOptions.from_settings(study.settings), first_model(session, study.id)
        timed("agreement", lambda: agreement_reports(frame, study.rubric_keys))
        timed("rubric A summary (bootstrap 2,000)", lambda: summarise_rubric_a(frame, n_boot=2000, seed=0))
        values = task_means(select_rubric(frame, "A"), RUBRIC_A)[[*RUBRIC_A.dimension_keys, COMPOSITE]]
        values = values.to_numpy(dtype=float)
        n, rng = len(values), np.random.default_rng(0)
        present = ~np.isnan(values)
        distinct, _present, shares = timed(
            "  of which distinct task rows", lambda: _distinct_rows(np.where(present, values, 0.0), present)
        )
        chunk = max(1, min(2000, 4_000_000 // len(shares)))
        for done in range(0, 2000, chunk):  # the bootstrap's two parts, as cluster_mean_ci runs them
            size = min(chunk, 2000 - done)
            draws = timed("  of which multinomial draws", lambda s=size: rng.multinomial(n, shares, size=s))
            timed("  of which matrix products", lambda d=draws: d.astype(float) @ distinct)
        timed("rubric B summary", lambda: summarise_rubric_b(frame, tie_rule=options.tie_rule))
        timed("harm model", lambda: harm_model(frame, options.harm_spec(model)))
        decisions = latest_adjudications(session, study.id)
        adjudicators = adjudicator_labels(session, study.id, pseudonymise=True)
        # the default export: pending tasks left out; only rated tasks are read, then the pending dropped
        rated = rated_counts(frame)
        for key in study.rubric_keys:
            rows = frame.loc[frame["rubric"] == key]
            most = export_snapshot.task_stats(session, study.id, get_rubric(key))[1]
            builder = LabelsBuilder(key, rows, decisions, adjudicators, labels_width(rows, most))
            outputs = [export_files.TableFile(Path(tmp), f"labels_{key}", fmt) for fmt in export_files.EXPORT_FORMATS]
            chunks = export_snapshot.task_chunks(session, study.id, get_rubric(key), rated_only=True)

            def complete(c=chunks):
                chunk = next(c, None)
                if chunk is None:
                    return None
                ids, targets = chunk["task_id"].to_numpy(np.int64), chunk["target_raters"].to_numpy(np.int64)
                return chunk.loc[~is_pending(ids, targets, rated)]

            while (chunk_rows := timed("labels: database read", complete)) is not None:
                table = timed("labels: table building", lambda c=chunk_rows, b=builder: b.table(c, n_rows=0))
                for out in outputs:
                    timed(f"labels: {out.fmt} writing", lambda o=out, t=table: o.write(t.frame))
            for out in outputs:
                timed(f"labels: {out.fmt} writing", out.close)
    return {name: round(seconds, 2) for name, seconds in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="database URL holding the study")
    parser.add_argument("--study", default="bench")
    parser.add_argument(
        "--baseline", default="7622e9a", help="git ref of the baseline (default: the export before streaming)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--stages", action="store_true", help="CPU seconds per stage of this tree's export")
    args = parser.parse_args()
    if args.stages:
        figures = stages(args.db, args.study)
        for name, seconds in figures.items():
            print(f"{name:40s} {seconds:7.2f} s CPU")
        print(json.dumps(figures))
        return
    with tempfile.TemporaryDirectory(prefix="export-speed-") as tmp:
        base_tree = Path(tmp) / "baseline"
        base_tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive.stdout, check=True)
        runs: dict[str, list[dict[str, float]]] = {"baseline": [], "current": []}
        outs = {}
        for index in range(args.repeat):
            for name, tree in (("baseline", base_tree), ("current", ROOT)):
                out = Path(tmp) / f"{name}-{index}"
                figures = run_export(tree, args.db, args.study, out)
                runs[name].append(figures)
                print(f"{name:8s} run {index + 1}: " + ", ".join(f"{k} {v}" for k, v in figures.items()), flush=True)
                if name in outs:
                    shutil.rmtree(outs[name])
                outs[name] = out
        problems = compare(outs["baseline"], outs["current"])
        print(
            "files: "
            + (
                "identical (every file byte for byte; manifest apart from snapshot_utc)"
                if not problems
                else "DIFFER: " + "; ".join(problems)
            )
        )
    best = {name: {key: min(run[key] for run in values) for key in values[0]} for name, values in runs.items()}
    ratios = {key: round(best["baseline"][key] / best["current"][key], 2) for key in best["current"]}
    print("baseline / current (best of each): " + ", ".join(f"{k} {v}x" for k, v in ratios.items()))
    print(json.dumps({"runs": runs, "best": best, "ratio": ratios, "identical": not problems}))


if __name__ == "__main__":
    main()
