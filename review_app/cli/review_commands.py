"""``medrev review``: import data, set up studies, assign reviewers, manage accounts, follow progress.

Who acts: every command runs as the operator at the shell (the services' ``SYSTEM`` actor, with
every right), because whoever can run ``medrev`` against the database can already change any row in
it. ``medrev review --as USERNAME ...`` (or ``MEDREV_ACTOR``) runs the command, its reads included,
under that account's role rules instead and names it in the audit log, e.g. for scripts a lead runs
on their own studies.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from review_app.cli.support import console, engine, err_console, friendly_errors, print_json

app = typer.Typer(help="Set up and run a clinician review study.", no_args_is_help=True)
user_app = typer.Typer(help="Reviewer accounts (argon2-hashed passwords, roles).", no_args_is_help=True)
study_app = typer.Typer(help="Create and list studies.", no_args_is_help=True)
app.add_typer(user_app, name="user")
app.add_typer(study_app, name="study")
_acting: dict[str, object] = {"actor": None}


@app.callback()
@friendly_errors
def review_main(
    as_user: Annotated[
        str | None,
        typer.Option(
            "--as",
            envvar="MEDREV_ACTOR",
            help="Act as this account, under its role rules (default: the operator, with every right).",
            show_envvar=True,
        ),
    ] = None,
) -> None:
    """Set up and run a clinician review study."""
    _acting["actor"] = _resolve_actor(as_user) if as_user else None


def _resolve_actor(username: str):
    from review_app.services.accounts import get_user
    from review_app.services.actors import Actor
    from review_app.services.errors import PermissionDenied

    user = get_user(engine(), username)
    if not user.active:
        raise PermissionDenied(f"{user.username} is deactivated and cannot act")
    return Actor(user.id)


def actor():
    """The services' actor for this command: ``SYSTEM``, or the active account named by ``--as``."""
    from review_app.services.actors import SYSTEM

    return _acting["actor"] or SYSTEM


@app.command("import")
@friendly_errors
def import_(
    path: Annotated[Path, typer.Argument(help="A file, a folder of subset files, or a bench run directory.")],
    kind: Annotated[
        str | None,
        typer.Option(
            help="items, responses, roster, run (a MedMisBench run) or judge (a retracted-paper run); "
            "detected when omitted."
        ),
    ] = None,
    study: Annotated[
        str | None,
        typer.Option(
            help="Create this study if it does not exist (a Rubric B study for a bench run directory); "
            "for a roster, also enrol the reviewers in it."
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="Refuse a file with any bad row whole (the default; wins over --skip-bad-rows)."),
    ] = False,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            "--skip-bad-rows",
            help="Import the good rows and report each bad one (default: a file with any bad row is refused whole).",
        ),
    ] = False,
) -> None:
    """Import benchmark items, model responses or a reviewer roster. A file with any bad row is refused whole."""
    from review_app.services import importing

    done = importing.import_into_study(
        engine(create=True), path, kind=kind, study=study, actor=actor(), skip_bad_rows=skip_bad_rows and not strict
    )
    for summary in done.summaries:
        console.print(str(summary))
        for issue in summary.skipped:
            console.print(f"  skipped {issue}")
    if done.created:
        console.print(f"created study {done.study!r}" + (f" ({done.note})" if done.note else ""))
    if done.enrolled:
        console.print(f"enrolled {len(done.enrolled)} reviewer(s) in {done.study!r}")


@study_app.command("create")
@friendly_errors
def study_create(
    name: Annotated[str, typer.Argument(help="A unique study name.")],
    rubrics: Annotated[str, typer.Option(help="Comma-separated rubric keys: A, B, or judge.")] = "A,B",
    description: Annotated[str, typer.Option(help="Free text shown to leads.")] = "",
) -> None:
    """Create a review study."""
    from review_app.services import studies

    study = studies.create_study(
        engine(create=True), name, rubrics=rubrics.split(","), description=description, actor=actor()
    )
    console.print(f"created study {study.name!r} with rubrics {study.rubrics}")


@study_app.command("lead")
@friendly_errors
def study_lead(
    name: Annotated[str, typer.Argument(help="Study name.")],
    username: Annotated[str, typer.Argument(help="A lead or admin account.")],
    remove: Annotated[bool, typer.Option(help="No longer a lead of this study.")] = False,
) -> None:
    """Make a lead account a lead of a study (leads manage the pool, assignment and reviewers of their studies)."""
    from review_app.services import studies

    studies.set_study_lead(engine(), name, username, actor=actor(), lead=not remove)
    leads = studies.study_leads(engine(), name)
    console.print(f"leads of {name!r}: {', '.join(leads) or '(none; admins manage it)'}")


@study_app.command("list")
@friendly_errors
def study_list() -> None:
    """List studies (with --as, those the account may open: a lead's own studies)."""
    from review_app.services import studies

    table = Table("name", "rubrics", "status", "created")
    for study in studies.list_studies(engine(), actor=actor()):
        table.add_row(study.name, study.rubrics, study.status, f"{study.created_at:%Y-%m-%d %H:%M}")
    console.print(table)


@app.command()
@friendly_errors
def pool(
    study: Annotated[str, typer.Option(help="Study name.")],
    size: Annotated[int, typer.Option(help="Number of review units to draw.")],
    quota: Annotated[
        list[str] | None,
        typer.Option(
            help="Quota on one margin, repeatable: subset=MEDMISQA:35,MEDMISMCQA:35 or provenance=neutral:34,... "
            "or model=NAME:33,...; counts, or weights scaled to --size."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw (same seed, same pool).")] = 0,
    condition: Annotated[str, typer.Option(help="Response condition to review (response rubrics).")] = "type1",
    language: Annotated[
        str | None, typer.Option(help="Only items in these languages, comma-separated (e.g. en).")
    ] = None,
    add: Annotated[bool, typer.Option(help="Draw more units into a study that already has a pool.")] = False,
) -> None:
    """Draw a stratified, seeded review pool and create its tasks."""
    from review_app.services import studies

    quotas = [studies.parse_quota(q) for q in quota or []]
    languages = {code.strip().lower() for code in language.split(",")} if language else None
    result = studies.draw_pool(
        engine(),
        study,
        size,
        quotas=quotas,
        seed=seed,
        condition=condition,
        languages=languages,
        add=add,
        actor=actor(),
    )
    console.print(str(result))


@app.command()
@friendly_errors
def assign(
    study: Annotated[str, typer.Option(help="Study name.")],
    raters: Annotated[int, typer.Option(help="Raters per multi-rated unit.")] = 2,
    dual_share: Annotated[float, typer.Option(help="Share of units that get --raters raters; the rest get one.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed for the choice of multi-rated units and tie-breaks.")] = 0,
) -> None:
    """Assign reviewers: balanced load, language-aware, never the same reviewer twice on a unit."""
    from review_app.services import assignment

    console.print(
        str(assignment.assign(engine(), study, raters=raters, dual_share=dual_share, seed=seed, actor=actor()))
    )


@app.command()
@friendly_errors
def reassign(
    study: Annotated[str, typer.Option(help="Study name.")],
    from_: Annotated[str, typer.Option("--from", help="Username of the reviewer who leaves.")],
    seed: Annotated[int, typer.Option(help="Seed for tie-breaks.")] = 0,
) -> None:
    """Give a leaving reviewer's unfinished tasks to others; their submitted work is kept."""
    from review_app.services import assignment

    console.print(str(assignment.reassign(engine(), study, from_, seed=seed, actor=actor())))


@app.command()
@friendly_errors
def enrol(
    study: Annotated[str, typer.Option(help="Study name.")],
    usernames: Annotated[list[str], typer.Argument(help="Usernames to enrol.")],
    remove: Annotated[bool, typer.Option(help="Deactivate these enrolments instead.")] = False,
) -> None:
    """Enrol reviewers in a study (assignment only uses enrolled, active reviewers)."""
    from review_app.services import assignment

    names = assignment.enrol(engine(), study, usernames, active=not remove, actor=actor())
    console.print(f"{'removed' if remove else 'enrolled'}: {', '.join(names)}")


@app.command()
@friendly_errors
def status(
    study: Annotated[str | None, typer.Option(help="Study name (all studies when omitted).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Progress by rubric, subset and reviewer (with --as, of the studies the account leads)."""
    from review_app.services import progress, studies

    db = engine()
    who = actor()
    names = [study] if study else [s.name for s in studies.list_studies(db, actor=who)]
    reports = [progress.study_progress(db, name, actor=who) for name in names]
    if not names and not json_ and _acting["actor"] is not None:
        err_console.print("No study here is led by the account named by --as (MEDREV_ACTOR).", highlight=False)
        return
    if not names and not json_:
        from review_app.config import get_settings
        from review_app.db.errors import safe_url

        err_console.print(
            f"The database {safe_url(get_settings().database_url)} holds no study yet: import data and create one "
            "(`medrev review import ... --study NAME`), or point MEDREV_DATABASE_URL (or medrev.toml) at the "
            "database you meant.",
            highlight=False,
        )
        return
    if json_:
        print_json([r.to_dict() for r in reports] if study is None else reports[0].to_dict())
        return
    for report in reports:
        console.rule(f"{report.study}: {report.complete_tasks}/{report.tasks} tasks complete")
        for title, rows in (("rubric", report.by_rubric), ("subset", report.by_subset)):
            table = Table(title, "tasks", "complete", "%", title_justify="left")
            for row in rows:
                share = 100 * row["complete"] / row["tasks"] if row["tasks"] else 0
                table.add_row(str(row[title]), str(row["tasks"]), str(row["complete"]), f"{share:.0f}")
            console.print(table)
        table = Table("reviewer", "assigned", "submitted", "open", "skipped", "flagged")
        for row in report.by_reviewer:
            table.add_row(
                row["username"], *(str(row[k]) for k in ("assigned", "submitted", "open", "skipped", "flagged"))
            )
        console.print(table)


@app.command()
@friendly_errors
def export(
    study: Annotated[str, typer.Option(help="Study name.")],
    out: Annotated[
        Path | None,
        typer.Option(
            help="A new (or empty) folder to write the export into "
            "(default: a new folder in MEDREV_EXPORT_DIR, ./exports unless set)."
        ),
    ] = None,
    format_: Annotated[
        str, typer.Option("--format", help="Comma-separated table formats: csv, jsonl, parquet.")
    ] = "csv,jsonl,parquet",
    real_names: Annotated[
        bool, typer.Option(help="Write reviewer and lead usernames instead of pseudonyms (R01, L01, ...).")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap CIs (same seed, same numbers).")] = 0,
    leave_out_pending: Annotated[
        bool,
        typer.Option(
            "--leave-out-pending/--include-pending",
            help="Leave out tasks still pending (fewer ratings than planned; the default), or include them with "
            "the ratings they have so far; the manifest records the choice.",
        ),
    ] = True,
) -> None:
    """Export labels, raw annotations, agreement and analysis tables, LaTeX, a codebook and a manifest."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from review_app.config import get_settings
    from review_app.services import compute_workers
    from review_app.services.export import study as exporting

    out = out or get_settings().export_dir / exporting.export_name(study)
    database = engine()
    # the statistics' worker is forked now, before the progress bar's thread starts: it imports nothing
    started = compute_workers.prestart(database, (exporting.__name__,), fork=True)
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), TaskProgressColumn(), TimeElapsedColumn())
    # drawn on a terminal only: elsewhere nothing shows it, yet its thread redrew it ten times a second,
    # on CPU the export's two processes need
    bar_shown = console.is_terminal and not console.is_dumb_terminal
    try:
        with Progress(*columns, console=console, transient=True, disable=not bar_shown, refresh_per_second=4) as bar:
            job = bar.add_task("Exporting", total=1.0)
            result = exporting.export_study(
                database,
                study,
                out,
                formats=format_,
                real_names=real_names,
                seed=seed,
                actor=actor(),
                pending="exclude" if leave_out_pending else "include",
                progress=lambda done, text: bar.update(job, completed=done, description=text),
            )
    finally:
        if started:  # the command's own workers (at exit anyway; now, for a process that goes on: a test)
            compute_workers.shutdown()
    console.print(str(result), highlight=False, markup=False)
    table = Table("file", "rows", "bytes", "sha256", title_justify="left")
    for file in result.files:
        table.add_row(file.path, "" if file.rows is None else str(file.rows), str(file.bytes), file.sha256[:12])
    console.print(table)


def _read_password(stdin: bool) -> str:
    if stdin:
        return sys.stdin.readline().rstrip("\n")
    return typer.prompt("Password", hide_input=True, confirmation_prompt=True)


@user_app.command("add")
@friendly_errors
def user_add(
    username: Annotated[str, typer.Argument(help="Lower-case sign-in name.")],
    role: Annotated[str, typer.Option(help="reviewer, lead or admin.")] = "reviewer",
    display_name: Annotated[str | None, typer.Option(help="Name shown to leads (default: the username).")] = None,
    email: Annotated[str | None, typer.Option(help="Email for identity-provider sign-in.")] = None,
    languages: Annotated[str, typer.Option(help="Languages read, comma-separated ISO codes.")] = "en",
    profession: Annotated[str, typer.Option(help="E.g. emergency physician.")] = "",
    country: Annotated[str, typer.Option(help="Country of practice.")] = "",
    years: Annotated[int | None, typer.Option(help="Years of post-qualification experience.")] = None,
    password_stdin: Annotated[bool, typer.Option(help="Read the password from standard input.")] = False,
    no_password: Annotated[bool, typer.Option(help="No local password (identity-provider sign-in only).")] = False,
) -> None:
    """Create an account. The password is asked for (hidden) unless --no-password."""
    from review_app.services import accounts

    profile = accounts.new_profile(
        username=username,
        display_name=display_name or username,
        role=role,
        email=email,
        languages=languages,
        profession=profession,
        country=country,
        years_experience=years,
    )
    password = None if no_password else _read_password(password_stdin)
    user = accounts.create_user(engine(create=True), profile, password=password, actor=actor())
    console.print(f"created {user.role} {user.username!r}")


@user_app.command("passwd")
@friendly_errors
def user_passwd(
    username: Annotated[str, typer.Argument(help="Account to change.")],
    password_stdin: Annotated[bool, typer.Option(help="Read the password from standard input.")] = False,
) -> None:
    """Set a new password (also clears a lock-out)."""
    from review_app.services import accounts

    accounts.set_password(engine(), username, _read_password(password_stdin), actor=actor())
    console.print(f"password changed for {username!r}")


@user_app.command("deactivate")
@friendly_errors
def user_deactivate(username: Annotated[str, typer.Argument(help="Account to deactivate.")]) -> None:
    """Deactivate an account: it can no longer sign in (its work is kept)."""
    _set_active(username, False)


@user_app.command("activate")
@friendly_errors
def user_activate(username: Annotated[str, typer.Argument(help="Account to reactivate.")]) -> None:
    """Reactivate an account."""
    _set_active(username, True)


def _set_active(username: str, active: bool) -> None:
    from review_app.services import accounts

    accounts.set_active(engine(), username, active, actor=actor())
    console.print(f"{'activated' if active else 'deactivated'} {username!r}")


@user_app.command("role")
@friendly_errors
def user_role(
    username: Annotated[str, typer.Argument(help="Account to change.")],
    role: Annotated[str, typer.Option(help="reviewer, lead or admin.")],
) -> None:
    """Give an account another role (its open sessions end)."""
    from review_app.services import accounts

    user = accounts.set_role(engine(), username, role, actor=actor())
    console.print(f"{user.username!r} is now a {user.role}")


@user_app.command("list")
@friendly_errors
def user_list(json_: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List accounts (never their passwords)."""
    from review_app.services import accounts

    users = accounts.list_users(engine())
    fields = ("username", "display_name", "role", "languages", "profession", "country", "years_experience", "active")
    if json_:
        print_json([{f: getattr(u, f) for f in fields} for u in users])
        return
    table = Table(*fields)
    for user in users:
        table.add_row(*(str(getattr(user, f) if getattr(user, f) is not None else "") for f in fields))
    console.print(table)
