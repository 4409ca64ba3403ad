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

Exit status: 0 written; 3 the oracle environment cannot be built (no suitable Python, no access to
the package index, an install that fails); 1 any other failure (irrCAC failed on a case, the output
cannot be written); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import time
import warnings
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
WEIGHTS: tuple[str, ...] = ("identity", "linear", "quadratic", "ordinal")
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve()
DEFAULT_OUT = ROOT / "tests" / "data" / "irrcac_oracle.json"
DEFAULT_ENV = Path.home() / ".cache" / "medrev" / "irrcac-oracle-env"
MARKER = "medrev-irrcac-oracle.json"
EXIT_FAILED = 1
EXIT_CANNOT_BUILD = 3
PIP_TIMEOUT_S = 1800

Table = list[list[float | None]]


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
# Tables: stdlib only, seeded, so the same cases come out of any Python.


def _panel(
    rng: random.Random,
    n_units: int,
    n_raters: int,
    categories: list[float],
    *,
    per_unit: tuple[int, int] | None = None,
    p_missing: float = 0.0,
    p_agree: float = 0.7,
    used: list[float] | None = None,
) -> Table:
    """Units x raters with a latent category per unit and raters who mostly agree (None: not rated).

    ``per_unit=(lo, hi)``: each unit is rated by lo..hi raters drawn from the panel (partial overlap);
    otherwise every cell is rated except with probability ``p_missing``. ``used`` restricts the ratings
    to some of the categories, leaving the others unused.
    """
    values = sorted(used if used is not None else categories)
    q = len(values)
    table: Table = []
    for _ in range(n_units):
        latent = rng.randrange(q)
        if per_unit is not None:
            raters = set(rng.sample(range(n_raters), rng.randint(*per_unit)))
        else:
            raters = {j for j in range(n_raters) if rng.random() >= p_missing}
        row: list[float | None] = []
        for j in range(n_raters):
            if j not in raters:
                row.append(None)
                continue
            draw = rng.random()
            if draw < p_agree:
                index = latent
            elif draw < p_agree + (1 - p_agree) * 0.7:
                index = min(max(latent + rng.choice((-1, 1)), 0), q - 1)
            else:
                index = rng.randrange(q)
            row.append(values[index])
        table.append(row)
    return table


def _number(value: float) -> float | int:
    """Integers stay integers in the JSON (scores 0, 1, 2 as the app stores them); 0.5 stays 0.5."""
    return int(value) if float(value).is_integer() else float(value)


def tables(handbook: Table) -> list[dict[str, object]]:
    """Every table of the fixture with its categories and the variants it is computed with.

    Each entry: ``id``, ``description``, ``table``, ``categories``, ``weights`` (the weightings),
    ``min_ratings`` (1 keeps singly rated units, 2 removes them before irrCAC sees the table) and
    ``confidence`` (the levels).
    """
    rng = random.Random(20140101)
    out: list[dict[str, object]] = []

    def add(
        id_: str,
        description: str,
        table: Table,
        categories: list[float],
        *,
        weights: tuple[str, ...] = WEIGHTS,
        min_ratings: tuple[int, ...] = (2,),
        confidence: tuple[float, ...] = (0.95,),
    ) -> None:
        out.append(
            {
                "id": id_,
                "description": description,
                "table": [[None if x is None else _number(x) for x in row] for row in table],
                "categories": [_number(c) for c in categories],
                "weights": list(weights),
                "min_ratings": list(min_ratings),
                "confidence": list(confidence),
            }
        )

    five = [1, 2, 3, 4, 5]
    three = [0, 1, 2]
    signed = [-1, 0, 1]
    binary = [0, 1]
    uneven = [0, 0.5, 1, 3]
    add(
        "handbook-4x12",
        "Gwet (2014) 4 raters x 12 units (irrCAC.datasets.raw_4raters; Krippendorff 2011's reliability data); "
        "unit 12 has one rating",
        handbook,
        five,
        min_ratings=(1, 2),
    )
    add(
        "handbook-4x12-90",
        "the handbook table at 90% confidence",
        handbook,
        five,
        min_ratings=(1, 2),
        confidence=(0.9,),
    )
    add(
        "unused-0-of-012",
        "nobody uses 0 of {0, 1, 2}: the full category set changes AC2 (medrev's unused-score test table)",
        [[2, 2, None], [2, 1, None], [1, 1, None], [2, 2, None], [1, 2, None], [2, 2, None], [2, 2, 1], [1, 1, None]],
        three,
    )
    add(
        "unused-3-of-uneven",
        "nobody uses 3 of {0, 0.5, 1, 3}: the unused extreme sets the linear/quadratic span",
        _panel(rng, 25, 3, uneven, used=[0, 0.5, 1]),
        uneven,
    )
    add(
        "unused-5-of-1to5",
        "nobody uses 5 of {1..5}, 4 raters with missing ratings",
        _panel(rng, 30, 4, five, used=[1, 2, 3, 4], p_missing=0.2),
        five,
    )
    panel = _panel(rng, 60, 10, three, per_unit=(2, 3))
    panel += [[None] * 10, [None] * 10]  # tasks nobody rated: irrCAC drops them, medrev never sees them
    add("panel-10-of-012", "partial overlap: each unit rated by 2-3 of 10 raters, two units unrated", panel, three)
    add(
        "panel-10-signed",
        "partial overlap on {-1, 0, 1} (the judge audit's label scale): 2-3 of 10 raters per unit",
        _panel(rng, 40, 10, signed, per_unit=(2, 3), p_agree=0.6),
        signed,
    )
    add(
        "singly-rated-5-panel",
        "1-3 of 5 raters per unit, about a third of the units singly rated",
        _panel(rng, 40, 5, three, per_unit=(1, 3)),
        three,
        min_ratings=(1, 2),
    )
    add(
        "singly-rated-12-panel-1to5",
        "1-4 of 12 raters per unit on {1..5}",
        _panel(rng, 50, 12, five, per_unit=(1, 4), p_agree=0.6),
        five,
        min_ratings=(1, 2),
    )
    add("one-category-012", "every rating is 2 of {0, 1, 2}", [[2, 2, 2]] * 10, three)
    add(
        "one-category-binary-missing",
        "every rating is 1 of {0, 1}, missing and singly rated units",
        [[1, 1], [1, None], [None, 1], [1, 1], [1, 1], [None, 1], [1, 1], [1, 1]],
        binary,
        weights=("identity",),
        min_ratings=(1, 2),
    )
    # With 2 or 3 raters a missing cell often leaves a unit singly rated, so both min_ratings are
    # computed; with more raters it seldom does and the two would be the same numbers.
    rater_sets = {2: (three, 30), 3: (signed, 30), 5: (five, 30), 10: (binary, 25), 20: (uneven, 20)}
    for n_raters, (categories, n_units) in rater_sets.items():
        add(
            f"raters-{n_raters}-complete",
            f"{n_raters} raters rate every one of {n_units} units",
            _panel(rng, n_units, n_raters, categories),
            categories,
        )
        add(
            f"raters-{n_raters}-incomplete",
            f"{n_raters} raters, each cell missing with probability 0.3",
            _panel(rng, n_units, n_raters, categories, p_missing=0.3),
            categories,
            min_ratings=(1, 2) if n_raters <= 3 else (2,),
        )
    add(
        "uneven-4-raters",
        "4 raters on the unevenly spaced {0, 0.5, 1, 3}",
        _panel(rng, 40, 4, uneven, p_missing=0.15, p_agree=0.6),
        uneven,
    )
    add(
        "binary-2-raters",
        "two raters on a 0/1 outcome with a rare class (AC1's paradox-resistant case)",
        [[1, 1]] * 3 + [[0, 0]] * 22 + [[0, 1], [1, 0], [0, 1]],
        binary,
        weights=("identity",),
    )
    add("two-units", "two units, three raters: one degree of freedom", [[0, 0, 1], [2, 2, 2]], three)
    add(
        "two-units-symmetric",
        "two units whose linearised terms coincide: zero variance (irrCAC's 1e-15 placeholder or a rounding residue)",
        [[0, 1, 1], [2, 2, 1]],
        three,
    )
    add(
        "disagreement-3units",
        "three units in total disagreement: the Student-t interval on 2 df reaches below -1",
        [[0, 2], [2, 0], [1, 1]],
        three,
    )
    add(
        "large-200",
        "200 units, 6 raters, 1-4 ratings per unit",
        _panel(rng, 200, 6, five, per_unit=(1, 4), p_agree=0.65),
        five,
        min_ratings=(1, 2),
    )
    add(
        "large-200-90",
        "a second 200-unit table at 90% confidence",
        _panel(rng, 200, 3, three, p_missing=0.1),
        three,
        weights=("identity", "ordinal"),
        confidence=(0.9,),
    )
    add(
        "no-dual-ratings",
        "every unit has one rating: Gwet's pa is undefined",
        [[0, None], [None, 2], [1, None], [None, 1]],
        three,
        weights=("ordinal",),
        min_ratings=(1,),
    )
    return out


# --------------------------------------------------------------------------------------------------
# Compute mode: runs inside the oracle environment only.


def _json_float(value: object) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _rated(row: list[float | None]) -> int:
    return sum(x is not None for x in row)


def irrcac_outputs(
    table: Table, categories: list[float], weights: str, min_ratings: int, confidence: float
) -> dict[str, object]:
    """irrCAC's ``CAC(...).gwet()`` on the table, as medrev's ``min_ratings`` sees it.

    With ``min_ratings=2`` the singly rated (and unrated) units are removed before irrCAC sees the
    table, since irrCAC always keeps them; with 1 the table goes in whole (irrCAC drops unrated units
    itself). Non-finite values become None, and which ones were not finite is recorded.
    """
    import numpy as np
    import pandas as pd
    from irrCAC.raw import CAC

    rows = [row for row in table if _rated(row) >= min_ratings]
    frame = pd.DataFrame(
        [[np.nan if x is None else float(x) for x in row] for row in rows],
        columns=[f"Rater{j + 1}" for j in range(len(table[0]))],
    )
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cac = CAC(frame, weights=weights, categories=list(categories), confidence_level=confidence, digits=15)
        est = cac.gwet()["est"]
    raw = {
        "coefficient": est["coefficient_value"],
        "se": est["se"],
        "ci_low": est["confidence_interval"][0],
        "ci_high": est["confidence_interval"][1],
        "pa": est["pa"],
        "pe": est["pe"],
        "p_value": est["p_value"],
    }
    outputs: dict[str, object] = {key: _json_float(value) for key, value in raw.items()}
    outputs["n_units"] = int(cac.n)
    outputs.update(_exact_t_interval(float(est["coefficient_value"]), float(est["se"]), int(cac.n) - 1, confidence))
    outputs["coefficient_name"] = est["coefficient_name"]
    nonfinite = {key: repr(float(value)) for key, value in raw.items() if not math.isfinite(float(value))}
    if nonfinite:
        outputs["nonfinite"] = nonfinite
    return outputs


def _exact_t_quantile(p: float, df: int) -> float:
    """The Student-t quantile to the last bit: scipy 1.12's ``t.ppf`` refined by Newton steps on ``t.sf``.

    scipy 1.12's ``t.ppf`` (irrCAC's, through ``t.interval``) is off by up to about 1e-8 relative
    (2.02269091173 for the 0.975 quantile on 39 df, against 2.02269092004); its ``t.sf`` and ``t.pdf``
    are accurate, so three Newton steps give the quantile to about 1e-15 relative.
    """
    from scipy import stats

    x = float(stats.t.ppf(p, df))
    for _ in range(3):
        x += float((stats.t.sf(x, df) - (1 - p)) / stats.t.pdf(x, df))
    return x


def _exact_t_interval(coefficient: float, se: float, df: int, confidence: float) -> dict[str, object]:
    """irrCAC's interval again, with the exact Student-t quantile in place of scipy 1.12's.

    The limits are irrCAC's statements (``t.interval`` on ``n - 1`` df around the coefficient, the upper
    end capped at 1, 15 digits) on irrCAC's coefficient and SE; only the quantile changes. A newer scipy
    (medrev's) has the exact quantile, so its limits can differ from irrCAC's by the quantile's error
    times the SE (1.2e-9 on this fixture): the comparison uses these limits, and checks that irrCAC's own
    differ from them by no more than that error explains.
    """
    from scipy import stats

    if df < 1 or not (math.isfinite(coefficient) and math.isfinite(se)):
        return {"t_quantiles": None, "t_quantile_exact": None, "ci_low_exact_t": None, "ci_high_exact_t": None}
    low_q, high_q = (1 - confidence) / 2, (1 + confidence) / 2
    exact = _exact_t_quantile(high_q, df)
    return {
        "t_quantiles": [float(stats.t.ppf(low_q, df)), float(stats.t.ppf(high_q, df))],
        "t_quantile_exact": exact,
        "ci_low_exact_t": round(coefficient - se * exact, 15),
        "ci_high_exact_t": round(min(1.0, coefficient + se * exact), 15),
    }


def _versions() -> dict[str, str]:
    from importlib import metadata

    names = {"irrCAC": "irrcac", "numpy": "numpy", "pandas": "pandas", "scipy": "scipy"}
    found = {key: metadata.version(name) for key, name in names.items()}
    found["python"] = ".".join(map(str, sys.version_info[:3]))
    return found


def _environment() -> list[str]:
    from importlib import metadata

    skip = {"pip", "setuptools", "wheel"}
    found = {(d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions()}
    return sorted(f"{name}=={version}" for name, version in found.items() if name and name not in skip)


def compute(out: Path, command: str) -> int:
    """Every case through irrCAC, written as the fixture (one case per line, so diffs name the case)."""
    try:
        import irrCAC.raw  # noqa: F401
        from irrCAC.datasets import raw_4raters
    except ImportError as error:
        print(f"cannot build the oracle: irrCAC is not importable in {sys.executable} ({error})", file=sys.stderr)
        return EXIT_CANNOT_BUILD
    wide = raw_4raters()
    handbook = [[None if x != x else float(x) for x in row] for row in wide.itertuples(index=False)]
    cases = []
    for spec in tables(handbook):
        for weights in spec["weights"]:
            for min_ratings in spec["min_ratings"]:
                for confidence in spec["confidence"]:
                    case_id = f"{spec['id']}/{weights}/min{min_ratings}/ci{round(confidence * 100)}"
                    cases.append(
                        {
                            "id": case_id,
                            "description": spec["description"],
                            "categories": spec["categories"],
                            "weights": weights,
                            "min_ratings": min_ratings,
                            "confidence": confidence,
                            "irrcac": irrcac_outputs(
                                spec["table"], spec["categories"], weights, min_ratings, confidence
                            ),
                            "table": spec["table"],
                        }
                    )
    header = {
        "what": "irrCAC 0.4.4 CAC(table, weights=W, categories=FULL_LIST, confidence_level=C, digits=15).gwet() "
        "on rating tables (units x raters, null = not rated); medrev's min_ratings=2 is irrCAC on the table "
        "without its units rated fewer than twice",
        "versions": _versions(),
        "pins": list(PINS),
        "environment": _environment(),
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
