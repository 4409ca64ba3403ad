"""Start-up and report speed of the command line (targets: ``--help`` <= 0.3 s, ``bench report`` <= 2 s).

Every figure is the fastest of several fresh processes, against baselines measured in the same run:

- ``medrev --help``, ``medrev bench --help`` and ``medrev stats harm-model --help`` against a bare
  ``python -c pass`` and against ``python -c "import typer"`` (the floor any typer command pays);
- what ``--help`` imports that it does not use: whether pandas, statsmodels, plotly, sqlmodel, sqlalchemy,
  streamlit, scipy or pydantic are loaded by ``import review_app.cli``;
- ``bench report`` on the sample run (tests/data/medmisbench_old_run) as it runs by default (tables,
  LaTeX, CSV, HTML figures) against the same report with ``--png`` (the old default), with ratios.

Processes run as an installed copy does after its first run: with bytecode caches (``compileall`` of the
project first, PYTHONDONTWRITEBYTECODE unset). ``medrev --help`` is also timed without them, as a sandbox
that sets PYTHONDONTWRITEBYTECODE=1 runs it (every project module compiled from source each time).

    .venv/bin/python bench/cli_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
MEDREV = [PYTHON, "-m", "review_app"]
SAMPLE_RUN = ROOT / "tests" / "data" / "medmisbench_old_run"
HEAVY = ("pandas", "statsmodels", "plotly", "sqlmodel", "sqlalchemy", "streamlit", "scipy", "pydantic", "numpy")


def timed(argv: list[str], repeat: int, env: dict[str, str] | None = None) -> float:
    """Fastest wall time of ``repeat`` fresh processes running ``argv`` (output discarded; must exit 0).

    The fastest run, not the median: on a shared machine the others measure the neighbours' load.
    """
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        times.append(time.perf_counter() - start)
    return min(times)


def loaded_by_help() -> list[str]:
    """The heavy packages that ``import review_app.cli`` (what every medrev command pays first) loads."""
    code = (
        "import sys, review_app.cli; "
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([PYTHON, "-c", code], check=True, capture_output=True, text=True).stdout
    return out.split()


def report_times(repeat: int) -> tuple[float, float]:
    """Median seconds of ``bench report`` on a copy of the sample run: default (HTML) and with --png."""
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        shutil.copytree(SAMPLE_RUN, run)
        (run / "expected_report.json").unlink(missing_ok=True)
        env = {**CACHED, "COLUMNS": "80"}
        default = timed([*MEDREV, "bench", "report", str(run)], repeat, env)
        with_png = timed([*MEDREV, "bench", "report", str(run), "--png"], max(1, repeat // 2), env)
    return default, with_png


CACHED = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
# An empty cache folder that is never written: every module is compiled from source, every time.
UNCACHED = {**CACHED, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": tempfile.mkdtemp(prefix="no-pyc-")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "review_app"), str(ROOT / "bench_core")],
                   check=True, stdout=subprocess.DEVNULL, env=CACHED)  # fmt: skip

    bare = timed([PYTHON, "-c", "pass"], repeat, CACHED)
    typer_floor = timed([PYTHON, "-c", "import typer, rich.console"], repeat, CACHED)
    print(f"baseline python -c pass: {bare:.3f} s; import typer + rich: {typer_floor:.3f} s (fastest of {repeat})")
    print(f"{'command':<36} {'s':>7} {'- bare':>7} {'x typer':>8} {'target':>7}")
    for label, argv in {
        "medrev --help": [*MEDREV, "--help"],
        "medrev bench --help": [*MEDREV, "bench", "--help"],
        "medrev bench run medmisbench --help": [*MEDREV, "bench", "run", "medmisbench", "--help"],
        "medrev stats harm-model --help": [*MEDREV, "stats", "harm-model", "--help"],
    }.items():
        seconds = timed(argv, repeat, CACHED)
        print(f"{label:<36} {seconds:>7.3f} {seconds - bare:>7.3f} {seconds / typer_floor:>8.2f} {'0.3':>7}")
    uncached = timed([*MEDREV, "--help"], repeat, UNCACHED)
    print(f"{'medrev --help, no bytecode cache':<36} {uncached:>7.3f} {uncached - bare:>7.3f} "
          f"{uncached / typer_floor:>8.2f}")  # fmt: skip
    heavy = loaded_by_help()
    print(f"heavy packages loaded by --help: {', '.join(heavy) if heavy else 'none'}")

    default, with_png = report_times(repeat)
    print(f"{'bench report (sample run)':<36} {'s':>7} {'ratio':>7} {'target':>7}")
    print(f"{'  default (tables, HTML figures)':<36} {default:>7.2f} {1.0:>7.2f} {'2.0':>7}")
    print(f"{'  --png (the old default)':<36} {with_png:>7.2f} {with_png / default:>7.2f}")


if __name__ == "__main__":
    main()
