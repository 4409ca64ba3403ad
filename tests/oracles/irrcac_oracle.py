#!/usr/bin/env python3
"""irrCAC 0.4.4 as a live oracle for medrev's Gwet AC1/AC2, run in a throwaway environment of its own.

medrev computes Gwet's coefficients itself (``review_app.analysis.agreement``) because irrCAC pins
scipy==1.12.0, numpy<2 and pandas<3 (and coverage<7), which the project's stack has left behind, and
computes wrong numbers under pandas 3. irrCAC stays the reference: this script builds (or reuses) a
virtual environment holding exactly the pinned versions below, re-runs itself inside it in
``--compute`` mode, and writes irrCAC's outputs on a deterministic set of rating tables to a JSON
fixture that ``tests/oracles/compare.py`` and ``tests/review_app/analysis/test_agreement_oracle.py``
compare medrev with.

    python3 tests/oracles/irrcac_oracle.py [--out PATH] [--env DIR]

The driver part needs only the standard library and any Python 3.11 (it never imports medrev), so it
runs before or without the project's environment. Every version is pinned, so the fixture only
changes when a table, a case or a pin changes: regenerating it and diffing shows a stale copy.

The script is three files in this folder, split along what runs where: this driver (any Python), the
rating tables (``irrcac_tables.py``, stdlib only) and irrCAC's side (``irrcac_compute.py``, inside the oracle
environment). The compute mode imports its two siblings from the script's own folder, so the script runs
from wherever the folder is, and the three move together.

Exit status: 0 written; 3 the oracle environment cannot be built (no suitable Python, no access to
the package index, an install that fails); 1 any other failure (irrCAC failed on a case, the output
cannot be written); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Exact versions, so the oracle is reproducible. irrCAC 0.4.4 requires scipy==1.12.0, numpy<2 (through
# scipy), pandas>=2.2.2,<3 and coverage>=6.2,<7; the others are the newest releases inside those bounds
# when the fixture was first written.
PINS: tuple[str, ...] = (
    "irrCAC==0.4.4",
    "scipy==1.12.0",
    "numpy==1.26.4",
    "pandas==2.2.3",
    "coverage==6.5.0",
    "python-dateutil==2.9.0.post0",
    "pytz==2024.2",
    "tzdata==2024.2",
    "six==1.16.0",
)
SUPPORTED_PYTHONS: tuple[tuple[int, int], ...] = ((3, 11), (3, 12))  # scipy 1.12.0 has wheels up to 3.12
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve()
DEFAULT_OUT = ROOT / "tests" / "data" / "irrcac_oracle.json"
DEFAULT_ENV = Path.home() / ".cache" / "medrev" / "irrcac-oracle-env"
MARKER = "medrev-irrcac-oracle.json"
EXIT_FAILED = 1
EXIT_CANNOT_BUILD = 3
PIP_TIMEOUT_S = 1800


class CannotBuild(Exception):
    """The oracle environment cannot be built here (exit 3), as opposed to a failure of the oracle itself."""


# --------------------------------------------------------------------------------------------------
# Driver: stdlib only, any Python 3.11.


def _display(path: Path) -> str:
    """A path as the regenerate command should show it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def regenerate_command(out: Path) -> str:
    command = "python3 tests/oracles/irrcac_oracle.py"
    if out.resolve() != DEFAULT_OUT:
        command += f" --out {_display(out)}"
    return command


def _python_version(executable: str) -> tuple[int, int, int] | None:
    """The interpreter's version if it runs and has ``venv`` (a pyenv shim may name one not installed)."""
    probe = "import sys, venv; print(*sys.version_info[:3])"
    try:
        done = subprocess.run([executable, "-c", probe], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        major, minor, micro = (int(x) for x in done.stdout.split())
    except ValueError:
        return None
    return major, minor, micro


def find_python() -> tuple[str, str]:
    """``python3.11`` on PATH, else this interpreter if it is 3.11 or 3.12 (what scipy 1.12.0 has wheels for)."""
    candidates = [c for c in (shutil.which("python3.11"), sys.executable) if c]
    for candidate in candidates:
        version = _python_version(candidate)
        if version and version[:2] in SUPPORTED_PYTHONS:
            return candidate, ".".join(map(str, version))
    raise CannotBuild(
        "cannot build the oracle: no Python 3.11 or 3.12 with the venv module was found "
        "(install python3.11, or run this script with a Python 3.11/3.12)"
    )


def _env_python(env: Path) -> Path:
    return env / "bin" / "python"


def _read_marker(env: Path) -> dict[str, object] | None:
    try:
        return json.loads((env / MARKER).read_text())
    except (OSError, ValueError):
        return None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_env(env: Path) -> tuple[Path, bool]:
    """The oracle environment's interpreter, building the environment unless one with the same pins exists.

    Returns the interpreter and whether it was reused. A directory that exists without this script's
    marker is left alone (it may be something else), so ``--env`` cannot wipe an unrelated folder.
    """
    marker = _read_marker(env)
    python = _env_python(env)
    if marker and marker.get("complete") and marker.get("pins") == list(PINS) and python.exists():
        check = subprocess.run([str(python), "-I", "-c", "import irrCAC.raw"], capture_output=True, text=True)
        if check.returncode == 0:
            return python, True
    if env.exists() and marker is None and any(env.iterdir()):
        raise CannotBuild(
            f"cannot build the oracle: {env} exists and is not an oracle environment; choose another --env"
        )
    base, version = find_python()
    if env.exists():
        shutil.rmtree(env)
    env.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([base, "-m", "venv", str(env)], capture_output=True, text=True)
    if made.returncode != 0:
        raise CannotBuild(f"cannot build the oracle: `{base} -m venv {env}` failed:\n{_tail(made.stderr)}")
    (env / MARKER).write_text(json.dumps({"pins": list(PINS), "python": version, "complete": False}))
    install = [str(python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check", *PINS]
    try:
        done = subprocess.run(install, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired as error:
        raise CannotBuild(
            f"cannot build the oracle: pip did not finish installing {' '.join(PINS)} in {PIP_TIMEOUT_S} s"
        ) from error
    if done.returncode != 0:
        raise CannotBuild(
            f"cannot build the oracle: pip could not install {' '.join(PINS)} "
            f"(is the package index reachable?):\n{_tail(done.stdout + done.stderr)}"
        )
    (env / MARKER).write_text(json.dumps({"pins": list(PINS), "python": version, "complete": True}))
    return python, False


def drive(out: Path, env: Path) -> int:
    started = time.perf_counter()
    try:
        python, reused = ensure_env(env)
    except CannotBuild as error:
        print(str(error), file=sys.stderr)
        return EXIT_CANNOT_BUILD
    built = time.perf_counter() - started
    print(f"oracle environment {env}: {'reused' if reused else f'built in {built:.0f} s'}", file=sys.stderr)
    child = [str(python), "-I", str(SCRIPT), "--compute", "--out", str(out), "--command", regenerate_command(out)]
    done = subprocess.run(child)
    if done.returncode == EXIT_CANNOT_BUILD:
        return EXIT_CANNOT_BUILD
    if done.returncode != 0:
        print(f"irrCAC ran in {env} but computing the fixture failed (exit {done.returncode})", file=sys.stderr)
        return EXIT_FAILED
    return 0


# --------------------------------------------------------------------------------------------------
# Compute mode: runs inside the oracle environment only (with irrcac_tables.py and irrcac_compute.py).


def compute(out: Path, command: str) -> int:
    """Every case through irrCAC, written as the fixture (one case per line, so diffs name the case)."""
    try:
        import irrCAC.raw  # noqa: F401
        from irrCAC.datasets import raw_4raters
    except ImportError as error:
        print(f"cannot build the oracle: irrCAC is not importable in {sys.executable} ({error})", file=sys.stderr)
        return EXIT_CANNOT_BUILD
    # ``-I`` leaves the script's folder off the path: the siblings are found there, after everything else.
    sys.path.append(str(SCRIPT.parent))
    from irrcac_compute import environment, oracle_cases, versions
    from irrcac_tables import tables

    wide = raw_4raters()
    handbook = [[None if x != x else float(x) for x in row] for row in wide.itertuples(index=False)]
    cases = oracle_cases(tables(handbook))
    header = {
        "what": "irrCAC 0.4.4 CAC(table, weights=W, categories=FULL_LIST, confidence_level=C, digits=15).gwet() "
        "on rating tables (units x raters, null = not rated); medrev's min_ratings=2 is irrCAC on the table "
        "without its units rated fewer than twice",
        "versions": versions(),
        "pins": list(PINS),
        "environment": environment(),
        "command": command,
        "compare": f"python -m tests.oracles.compare {_display(out)}",
        "n_cases": len(cases),
    }
    lines = ",\n".join(json.dumps(case, allow_nan=False) for case in cases)
    text = '{\n"header": ' + json.dumps(header, indent=1, allow_nan=False) + ',\n"cases": [\n' + lines + "\n]\n}\n"
    json.loads(text)  # the file must parse before it replaces the previous one
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(text)
    partial.replace(out)
    print(f"{len(cases)} cases written to {out} ({len(text) / 1024:.0f} KB)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"fixture to write (default {_display(DEFAULT_OUT)})"
    )
    parser.add_argument("--env", type=Path, default=DEFAULT_ENV, help=f"oracle environment (default {DEFAULT_ENV})")
    parser.add_argument("--compute", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--command", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = args.out.expanduser().resolve()
    if args.compute:
        try:
            return compute(out, args.command or regenerate_command(out))
        except OSError as error:
            print(f"the fixture cannot be written: {error}", file=sys.stderr)
            return EXIT_FAILED
    return drive(out, args.env.expanduser().resolve())


if __name__ == "__main__":
    sys.exit(main())
