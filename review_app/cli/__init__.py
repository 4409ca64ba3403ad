"""The root ``medrev`` command: review study set-up, the app, the database, benchmarks and statistics.

The package is review_app's command line: this module holds the root group and its own commands
(``demo``, ``app``, ``db``); ``review_commands`` is ``medrev review``, ``stats_commands`` is
``medrev stats`` and ``support`` what they share (the engine, one error path, JSON output). ``bench``
is bench_core's group (``bench_core.cli``). The groups are imported only when run (``lazy_commands``),
so ``medrev --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, ClassVar

import typer

from bench_core.cli import DEBUG_HELP, MedrevGroup, debug_option
from review_app.cli.support import console, friendly_errors


class Medrev(MedrevGroup):
    """The root group: ``review``, ``stats`` and ``bench`` are imported and built only when used (fast --help)."""

    lazy_commands: ClassVar[dict[str, tuple[str, str, str]]] = {
        "review": ("review_app.cli.review_commands", "app", "Set up and run a clinician review study."),
        "stats": ("review_app.cli.stats_commands", "app", "Agreement, harm model and Wilson proportions on CSV files."),
        "bench": ("bench_core.cli", "app", "Run benchmarks against model endpoints and report their metrics."),
    }

    def exit_code(self, exc: BaseException) -> int | None:
        """A review service's refusal is bad input (2); a database fault (unreachable, read-only, not a
        database) is a fault of the machine (1), wherever it is raised (``stats plan --pilot`` too)."""
        from review_app.errors import ServiceError

        if isinstance(exc, ServiceError):
            faults = sys.modules.get("review_app.db.errors")  # loaded if the fault came from the database
            return 1 if faults is not None and isinstance(exc, faults.DatabaseUnavailable) else 2
        return super().exit_code(exc)


app = typer.Typer(
    help="medrev: benchmarks of medical LLMs under misleading evidence, and clinician review of the results.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    cls=Medrev,  # the one error path: bad input exit 2, machine faults exit 1, no traceback
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@app.callback()
def main(
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar="MEDREV_DATABASE_URL",
            help="SQLAlchemy URL of the review database (default: the nearest medrev.toml, "
            "else a SQLite file in MEDREV_HOME).",
            show_envvar=True,
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help=DEBUG_HELP)] = False,
) -> None:
    """medrev command line. Run a command with --help for its options."""
    debug_option(debug)
    if database_url:
        os.environ["MEDREV_DATABASE_URL"] = database_url


@db_app.command("upgrade")
@friendly_errors
def db_upgrade() -> None:
    """Apply all migrations to the configured database (also done automatically on first use)."""
    from review_app.db.connect import migrate_now

    revision, url = migrate_now()
    console.print(f"database at revision {revision}: {url}")


@db_app.command("current")
@friendly_errors
def db_current() -> None:
    """Show the database's migration revision and the latest one available."""
    from review_app.db.connect import revisions

    current, latest, url = revisions()
    console.print(f"current: {current}, latest: {latest} ({url})")


@app.command()
@friendly_errors
def demo(
    db: Annotated[str, typer.Option(help="SQLite file for the demo study.")] = "medrev-demo.db",
    fresh: Annotated[bool, typer.Option(help="Delete an existing demo file first.")] = False,
    host: Annotated[
        str,
        typer.Option(
            help="Address to serve on. The default lets only this computer in, because the demo's passwords "
            "are printed and public; 0.0.0.0 opens it to your network."
        ),
    ] = "127.0.0.1",
    port: Annotated[int | None, typer.Option(help="Port to serve on (default 8501).")] = None,
    no_app: Annotated[bool, typer.Option("--no-app", help="Only seed; do not start the app.")] = False,
) -> None:
    """Seed the demo study in a local SQLite file and start the review app on it (on 127.0.0.1 unless --host)."""
    from review_app.demo import remember_demo, seed_demo

    report = seed_demo(db, fresh=fresh)
    console.print(report.describe(), highlight=False)
    console.print("\n" + remember_demo(report), highlight=False)
    if no_app:
        return
    from review_app.ui.server import listen_address, run_app

    address = listen_address(host, port)
    console.print(f"\nStarting the demo app on {address.describe()}; Ctrl-C stops it.")
    if address.local_only:
        console.print(
            "To let others on your network try it, run `medrev demo --host 0.0.0.0` (everyone who can reach "
            "this computer can then sign in with the public demo passwords: never put real data in the demo)."
        )
    run_app(address, report.url)


@app.command("app")
@friendly_errors
def app_(
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to serve on (STREAMLIT_SERVER_ADDRESS also works). The default, 127.0.0.1, lets in only "
            "this computer: its reverse proxy (docs/deployment.md); 0.0.0.0 serves every network interface."
        ),
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port to serve on (STREAMLIT_SERVER_PORT also works).")] = None,
) -> None:
    """Start the review app on the configured database (migrated on first use), on 127.0.0.1 unless --host."""
    from review_app.config import get_settings
    from review_app.db.connect import get_engine
    from review_app.db.engine import read_only_reason
    from review_app.db.errors import safe_url
    from review_app.ui.server import LOOPBACK, listen_address, run_app

    url = get_settings().database_url
    engine = get_engine(url)  # connect and migrate now, so a database fault stops here in one sentence
    address = listen_address(host, port, default_host=LOOPBACK)
    console.print(f"Review app on {address.describe()}, database {safe_url(url)}")
    if address.local_only:
        console.print(
            "Reach it through a reverse proxy on this computer (docs/deployment.md), or serve other computers "
            "directly with `medrev app --host 0.0.0.0`."
        )
    reason = read_only_reason(engine)
    if reason is not None:
        console.print(
            f"note: the database is read-only ({reason}): everyone can sign in and read, nothing can be saved."
        )
    run_app(address, url)
