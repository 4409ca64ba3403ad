"""``medrev stats``: the review analysis on any CSV, for scripts and for checking a paper's numbers.

Names, flags and JSON keys are the contract of docs/command-line.md and stay stable. Bad input (a missing
file or column, a non-numeric score, an unknown reference level, k > n) prints one line naming the problem
and exits with code 2; nothing is written and no traceback is shown. Every command ends in ``_report``, so
they all refuse, print JSON and print their table the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Protocol, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from review_app.analysis.priors import PENALTY_HELP

if TYPE_CHECKING:  # the analysis (pandas, scipy) is imported by the command that runs, not by --help
    import pandas as pd

    from review_app.analysis import AgreementResult, HarmModelResult

app = typer.Typer(help="Agreement, harm model and Wilson proportions on CSV files.", no_args_is_help=True)
console = Console()
CSV_HEADER_LINES = 2  # frame position 0 is line 2 of the file


class _Result(Protocol):
    def to_dict(self) -> dict[str, object]: ...


R = TypeVar("R", bound=_Result)


def _fail(message: str, code: int = 2) -> NoReturn:
    """``error: message`` on stderr and exit ``code`` (2: bad input, 1: a fault of the machine or database)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=code)


def _read_csv(path: Path) -> tuple[pd.DataFrame, list[int]]:
    """The CSV as a frame of text cells, and the file line of every frame row (for messages naming the line).

    The file is checked first as every medrev input is (a folder, a FIFO, a BOM, a NUL byte, bytes that are not
    UTF-8, an overlong line: each refused naming the file and line); lines are counted by the ``csv`` module,
    so blank lines and quoted cells spanning lines do not shift them.
    """
    import csv
    import io

    import pandas as pd

    from bench_core.kernel.errors import InputError
    from bench_core.kernel.tabular import read_text_lines

    if not path.exists():
        _fail(f"input file {str(path)!r} does not exist")
    try:
        text = "".join(read_text_lines(path))
    except InputError as error:
        _fail(str(error))
    if not text.strip():
        _fail(f"input file {str(path)!r} is empty")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
        rows: list[list[str]] = []
        lines: list[int] = []
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue  # a blank line, as pandas skips it
            rows.append(record)
            lines.append(reader.line_num)
    except csv.Error as error:
        _fail(f"{path}:{reader.line_num}: not a readable CSV ({error})")
    if not rows:
        _fail(f"{path}: no data rows (only the header on line 1)")
    width = len(header)
    for record, line in zip(rows, lines, strict=True):
        if len(record) > width:
            _fail(f"{path}:{line}: {len(record)} cells, the header has {width} columns")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=True, skipinitialspace=True)
    except (pd.errors.ParserError, ValueError) as error:
        _fail(f"input file {str(path)!r} is not a readable CSV: {error}")
    if len(frame) != len(lines):  # pandas read the rows differently: fall back to positions
        return frame, [position + CSV_HEADER_LINES for position in range(len(frame))]
    return frame, lines


def _clean(value: object) -> object:
    """JSON-safe: NaN and infinities become null, containers recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _print_json(data: dict[str, object]) -> None:
    typer.echo(json.dumps(_clean(data), indent=2, allow_nan=False))


def _report(compute: Callable[[], R], *, as_json: bool, show: Callable[[R], None], source: Path | None = None) -> None:
    """Run one command's analysis and print its result: ``to_dict()`` as JSON with ``--json``, else ``show``.

    The one place a command's refusals become ``error: ...`` on stderr, so every command reports them alike:
    the analysis's (``AnalysisInputError``, prefixed with the ``source`` file so the message names it) and a
    service's (``ServiceError``) exit 2; a database fault (``DatabaseUnavailable``, ``stats plan --pilot``)
    is the machine's and exits 1.
    """
    import sys

    from review_app.analysis.layout import AnalysisInputError
    from review_app.errors import ServiceError

    try:
        result = compute()
    except AnalysisInputError as error:
        _fail(f"{source}: {error}" if source is not None else str(error))
    except ServiceError as error:
        faults = sys.modules.get("review_app.db.errors")  # loaded if the fault came from the database
        _fail(str(error), code=1 if faults is not None and isinstance(error, faults.DatabaseUnavailable) else 2)
    if as_json:
        _print_json(result.to_dict())
    else:
        show(result)


def _print_remarks(*, notes: Sequence[str] = (), warnings: Sequence[str] = ()) -> None:
    """The notes, then the warnings, under a result's table: one marked line each, so they read alike."""
    for note in notes:
        console.print(f"[cyan]note:[/cyan] {escape(note)}")
    for warning in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")


def _fmt(value: object, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@app.command("agreement")
def agreement_command(
    input: Annotated[Path, typer.Option("--input", help="Long CSV: one row per rating.")],
    unit: Annotated[str, typer.Option("--unit", help="Column identifying the rated unit (task).")],
    rater: Annotated[str, typer.Option("--rater", help="Column identifying the rater.")],
    score: Annotated[str, typer.Option("--score", help="Column holding the score.")],
    weights: Annotated[
        str, typer.Option("--weights", help="ordinal, linear, quadratic or identity (AC1).")
    ] = "ordinal",
    categories: Annotated[
        str, typer.Option("--categories", help="Every possible score, comma-separated (used or not).")
    ] = "0,1,2",
    min_ratings: Annotated[
        int,
        typer.Option(
            "--min-ratings",
            help="Units with fewer ratings are set aside (and counted). 2 (the default) = dual-rated units only; "
            "1 keeps every unit, as irrCAC and Gwet's handbook do.",
        ),
    ] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Gwet's AC2 (AC1 with identity weights), Krippendorff's ordinal alpha and percent agreement."""
    from review_app.analysis.agreement import WEIGHT_SCHEMES, agreement

    if weights not in WEIGHT_SCHEMES:
        _fail(f"unknown --weights {weights!r}; choose one of {', '.join(WEIGHT_SCHEMES)}")
    try:
        category_values = [float(part) for part in categories.split(",") if part.strip()]
    except ValueError:
        _fail(f"--categories must be comma-separated numbers, got {categories!r}")
    data, lines = _read_csv(input)

    def compute() -> AgreementResult:
        return agreement(
            data,
            score,
            unit=unit,
            rater=rater,
            weights=weights,
            categories=category_values,
            min_ratings=min_ratings,
            row_offset=lines,
        )

    _report(compute, as_json=as_json, show=lambda result: _agreement_table(result, score, weights), source=input)


def _agreement_table(result: AgreementResult, score: str, weights: str) -> None:
    table = Table(title=escape(f"Agreement on {score} ({result.coefficient_name}, {weights} weights)"))
    table.add_column("measure")
    table.add_column("value", justify="right")
    level = round(result.confidence * 100)
    rows = [
        (f"units (>= {result.min_ratings} rating{'s' if result.min_ratings > 1 else ''})", result.n_units),
        (f"units set aside (< {result.min_ratings} ratings)", result.n_units_dropped),
        ("raters", result.n_raters),
        (result.coefficient_name, result.coefficient),
        ("SE", result.se),
        (f"{level}% CI", None if result.ci_low is None else f"{result.ci_low:.4f} to {result.ci_high:.4f}"),
        ("percent agreement", result.percent_agreement),
        ("Krippendorff's alpha (ordinal)", result.alpha_ordinal),
    ]
    rows += [(f"score {c} used", n) for c, n in result.to_dict()["category_counts"].items()]
    for name, value in rows:
        table.add_row(escape(name), _fmt(value))
    console.print(table)
    _print_remarks(warnings=result.warnings)


@app.command("harm-model")
def harm_model_command(
    input: Annotated[Path, typer.Option("--input", help="CSV with one row per annotation.")],
    outcome: Annotated[str, typer.Option("--outcome", help="0/1 outcome column.")],
    fixed: Annotated[str, typer.Option("--fixed", help="Categorical fixed-effect columns, comma-separated.")],
    group: Annotated[str, typer.Option("--group", help="Column whose levels get a random intercept.")],
    reference: Annotated[
        list[str] | None, typer.Option("--reference", help="COL=LEVEL reference level; repeat for several columns.")
    ] = None,
    n_agq: Annotated[
        int, typer.Option("--nagq", help="1 = Laplace; more = adaptive Gauss-Hermite points (lme4's nAGQ).")
    ] = 1,
    penalty: Annotated[str, typer.Option("--penalty", help=PENALTY_HELP)] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Random-intercept logistic regression by maximum likelihood (lme4::glmer's estimates).

    Reference levels: --reference COL=LEVEL, otherwise each column's most frequent level (named in
    the output). A level with no events (or only events) is separated: its term is reported as not
    estimable and the other terms keep lme4's estimates; --penalty normal gives it a finite estimate
    under a weakly informative prior (blme::bglmer's objective).
    """
    from review_app.analysis.harm_model import Penalty, fit_random_intercept_logit
    from review_app.analysis.layout import AnalysisInputError

    fixed_columns = [c.strip() for c in fixed.split(",") if c.strip()]
    references: dict[str, str] = {}
    for entry in reference or []:
        column, sep, level = entry.partition("=")
        if not sep or not column.strip() or not level.strip():
            _fail(f"--reference must look like COL=LEVEL, got {entry!r}")
        references[column.strip()] = level.strip()
    try:
        chosen_penalty = Penalty.parse(penalty)
    except AnalysisInputError as error:
        _fail(f"--penalty: {error}")
    data, lines = _read_csv(input)

    def compute() -> HarmModelResult:
        return fit_random_intercept_logit(
            data,
            outcome,
            fixed_columns,
            group,
            reference=references,
            n_agq=n_agq,
            penalty=chosen_penalty,
            row_offset=lines,
        )

    _report(compute, as_json=as_json, show=lambda result: _harm_model_table(result, group), source=input)


def _harm_model_table(result: HarmModelResult, group: str) -> None:
    from review_app.analysis.formatting import format_ci, format_odds_ratio, format_p

    # Compact (no vertical rules, three decimals) so the longest term names fit 80 columns unbroken.
    table = Table(
        title=escape(f"{result.formula}\n{result.estimation}"),
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    table.add_column("term", no_wrap=True)
    for name in ("log OR", "SE", "OR", f"{round(result.confidence * 100)}% CI", "p"):
        table.add_column(name, justify="right", no_wrap=True)
    for term in result.terms:
        if not term.estimable:
            # The row says it is not estimable; the note below the table names the level and why.
            table.add_row(escape(term.name), "—", "—", "n/e", "not estimable", "—")
            continue
        table.add_row(
            escape(term.name + (" *" if term.separated else "")),
            _fmt(term.estimate, 3),
            _fmt(term.se, 3),
            format_odds_ratio(term.odds_ratio),
            format_ci(term.or_ci_low, term.or_ci_high),
            format_p(term.p_value),
        )
    console.print(table)
    console.print(
        escape(
            f"n = {result.n}, groups = {result.n_groups}, loglik = {result.loglik:.4f}, converged = "
            f"{result.converged}; {group} variance = {result.group_variance:.4f}, latent ICC = {result.icc:.4f}"
        )
    )
    console.print(escape(f"reference levels: {result.references_text()}"))
    if result.penalty.active:
        console.print(escape(f"penalty {result.penalty.key}: {result.penalty.describe()}"))
    if any(t.separated and t.estimable for t in result.terms):
        console.print(escape(f"* separated: the estimate is finite only through the {result.penalty.key} prior"))
    _print_remarks(notes=[*result.separation_notes(), *result.notes], warnings=result.warnings)


@app.command("proportion")
def proportion_command(
    successes: Annotated[int, typer.Option("--successes", help="Number of successes k.")],
    n: Annotated[int, typer.Option("--n", help="Number of trials n.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a line of text.")] = False,
) -> None:
    """A rate with its Wilson 95% CI, e.g. ``--successes 34 --n 89`` -> 38.2% (28.8-48.6)."""
    from review_app.analysis.proportions import wilson

    _report(lambda: wilson(successes, n), as_json=as_json, show=lambda result: console.print(result.summary()))


@app.command("plan")
def plan_command(
    metric: Annotated[str, typer.Option("--metric", help="rate, ac2 or harm-or.")],
    expected: Annotated[
        float | None,
        typer.Option(
            "--expected",
            help="Expected value: the rate (rate), AC2 (ac2) or the reference level's event rate (harm-or, "
            "default 0.38). Taken from --pilot when omitted.",
        ),
    ] = None,
    ci_width: Annotated[float | None, typer.Option("--ci-width", help="Target width of the 95% CI.")] = None,
    categories: Annotated[int, typer.Option("--categories", help="Number of rating categories (ac2).")] = 3,
    raters: Annotated[int, typer.Option("--raters", help="Raters per dual-rated task.")] = 2,
    odds_ratio: Annotated[
        float | None, typer.Option("--odds-ratio", help="Smallest adjusted odds ratio to detect (harm-or).")
    ] = None,
    power: Annotated[float, typer.Option("--power", help="Power to detect it (harm-or).")] = 0.8,
    reviewers: Annotated[int | None, typer.Option("--reviewers", help="Reviewers in the panel (harm-or).")] = None,
    icc: Annotated[float | None, typer.Option("--icc", help="Latent reviewer ICC of the harm model (harm-or).")] = None,
    pilot: Annotated[
        str | None,
        typer.Option("--pilot", help="A pilot study in the review database whose annotations are resampled."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the simulation (same seed, same plan).")] = 0,
    tasks: Annotated[
        int | None, typer.Option("--tasks", help="Tasks the study has anyway (ac2: the dual share is taken of these).")
    ] = None,
    dual_share: Annotated[
        float | None,
        typer.Option(
            "--dual-share", help="Share of tasks rated by --raters reviewers (harm-or: default 0.72; rate: 0)."
        ),
    ] = None,
    share: Annotated[
        float, typer.Option("--share", help="Share of tasks at the compared level of the tested term (harm-or).")
    ] = 0.5,
    alpha: Annotated[float, typer.Option("--alpha", help="Two-sided significance level of the test (harm-or).")] = 0.05,
    score: Annotated[
        str | None, typer.Option("--score", help="Pilot dimension to plan AC2 for (default harm_potential).")
    ] = None,
    term: Annotated[
        str | None, typer.Option("--term", help="Pilot harm-model term to plan for, e.g. 'model[model-b]'.")
    ] = None,
    seconds_per_rating: Annotated[
        float | None,
        typer.Option(
            "--seconds-per-rating", help="Seconds per rating for reviewer-hours (default: the pilot's median)."
        ),
    ] = None,
    simulations: Annotated[
        int | None,
        typer.Option("--simulations", help="Simulations of the final check (rate 2000, ac2 200, harm-or 300)."),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Worker processes (default: one per available core).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a summary.")] = False,
) -> None:
    """Tasks, dual-rated tasks and reviewer-hours a study needs, by seeded simulation."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from review_app.cli.support import engine
    from review_app.services.planning import PlanRequest, make_plan

    request = PlanRequest(
        metric=metric,
        expected=expected,
        ci_width=ci_width,
        categories=categories,
        raters=raters,
        odds_ratio=odds_ratio,
        power=power,
        reviewers=reviewers,
        icc=icc,
        pilot=pilot,
        score=score,
        term=term,
        tasks=tasks,
        dual_share=dual_share,
        share=share,
        alpha=alpha,
        seconds_per_rating=seconds_per_rating,
        simulations=simulations,
        seed=seed,
        workers=workers,
    )
    bar = Progress(
        TextColumn("simulating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    job = bar.add_task("plan", total=None)

    def progress(done: int, budget: int) -> None:
        bar.update(job, completed=done, total=max(budget, done))

    def compute():  # -> the plan (review_app.services.planning.make_plan)
        with bar:
            return make_plan(engine() if pilot else None, request, progress=progress)

    _report(compute, as_json=as_json, show=lambda plan: typer.echo(plan.summary()))
