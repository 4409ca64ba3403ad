"""``medrev review export`` at full scale against a baseline commit, in the same run (issue 17).

Runs the export command in a child process for the baseline tree (``--baseline``, a git ref, checked
out with ``git archive`` into a temporary folder) and for this tree, alternately, ``--repeat`` times
each, and prints per run: wall seconds, CPU seconds (user + system of the command and of the compute
worker it starts), peak RSS of the command process (``wait4``: the largest of the process and its
worker) and peak RSS of the process tree (the command and its worker, sampled every 0.1 s). Then
it compares the two exports: every file byte for byte (sha256), and ``manifest.json`` without its
snapshot time. The machine is shared: compare the ratios of one run, not figures across runs.

    .venv/bin/python bench/export_speed.py --db sqlite:////work/benchdb/full_export.db [--study bench]
        [--baseline 7622e9a] [--repeat 1]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="database URL holding the study")
    parser.add_argument("--study", default="bench")
    parser.add_argument(
        "--baseline", default="7622e9a", help="git ref of the baseline (default: before issue 17 export work)"
    )
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
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
