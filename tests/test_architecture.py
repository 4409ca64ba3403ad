"""The layout rules of docs/architecture.md, checked on the import statements of the source tree.

The import graph (every import, relative and function-level ones resolved, and the modules imported
lazily by name), the review_app layer tables and the finders that check them are in
``tests/import_graph.py``; the bench_core tables and finders are in ``tests/bench_core_rules.py``. The
finders and the cycle search are functions of plain data (arrows, source text), run here on the tree
and, in a test of their own, on a planted violation, so each is seen to fail.
"""

from __future__ import annotations

import ast

import pytest

from tests.bench_core_rules import (
    LAYERS,
    design_use_violations,
    design_violations,
    kernel_violations,
    review_app_violations,
    several_designs_violations,
    terminal_violations,
)
from tests.import_graph import (
    IMPORTS,
    MODULES,
    ROOT,
    TREES,
    Arrow,
    CallWithoutUser,
    acting,
    arrows_of,
    calls_without_user,
    import_cycles,
    internal,
    internal_graph,
    is_package_module,
    is_page,
    layer_violations,
    lazy_names,
    lazy_violations,
    page_violations,
    public_names,
)


def test_bench_core_top_level_holds_only_packages():
    """A file directly in bench_core/ belongs in a design, the kernel or the CLI (docs/architecture.md)."""
    loose = sorted(p.name for p in (ROOT / "bench_core").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert loose == [], f"move these into a design package, kernel/ or cli/: {loose}"
    packages = sorted(p.name for p in (ROOT / "bench_core").iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(LAYERS), f"bench_core packages {packages}; a new one must be a design or fit one"


def test_kernel_imports_no_design_and_no_cli():
    wrong = kernel_violations(IMPORTS)
    assert wrong == [], "kernel/ imports only kernel/ (a design-specific need belongs in the design):\n" + "\n".join(
        wrong
    )


def test_designs_import_each_other_only_as_allowed():
    wrong = design_violations(IMPORTS)
    assert wrong == [], "designs import only the kernel, generation -> medmisbench and mitigation -> medmisbench:\n" + (
        "\n".join(wrong)
    )


def test_only_the_cli_imports_several_designs():
    wrong = several_designs_violations(IMPORTS)
    assert wrong == [], "only cli/ may import two designs:\n" + "\n".join(wrong)


def test_flags_and_terminal_output_live_in_the_cli():
    wrong = terminal_violations(IMPORTS)
    assert wrong == [], "typer and rich belong in cli/ (designs return data; cli/ prints it):\n" + "\n".join(wrong)


def test_bench_core_never_imports_review_app():
    wrong = review_app_violations(IMPORTS)
    assert wrong == []


def test_review_app_uses_designs_through_their_public_init_and_the_kernel():
    wrong = design_use_violations(IMPORTS, public_names)
    assert wrong == [], (
        "review_app imports bench_core only through a design's public __init__ (names in its __all__) and "
        "kernel modules:\n" + "\n".join(wrong)
    )


def test_the_bench_core_rules_catch_planted_violations():
    """Each bench_core rule fails on a graph that breaks it and lets the arrows it allows through."""

    def arrow(source: str, target: str, line: int = 1, names: tuple[str, ...] = ()) -> Arrow:
        return Arrow(source, target, line, names)

    kernel, cli, runner = "bench_core.kernel.stats", "bench_core.cli.main", "bench_core.kernel.runner"
    medmis, trojan, generation = "bench_core.medmisbench.run", "bench_core.trojan.run", "bench_core.generation.build"
    graph = {
        "bench_core": [],
        "bench_core.kernel.text": [],
        kernel: [
            arrow(kernel, "bench_core.kernel.text"),
            arrow(kernel, "bench_core.medmisbench.items.MCQItem", 2),
            arrow(kernel, "bench_core.cli", 3),
            arrow(kernel, "rich.console", 4),
            arrow(kernel, "json", 5),
        ],
        runner: [arrow(runner, "rich.progress"), arrow(runner, "review_app.db.models", 6)],
        "bench_core.cli": [],
        cli: [arrow(cli, medmis), arrow(cli, trojan), arrow(cli, "typer"), arrow(cli, "rich.table")],
        "bench_core.medmisbench.items": [],
        medmis: [
            arrow(medmis, "bench_core.medmisbench.items"),
            arrow(medmis, "bench_core.kernel.text"),
            arrow(medmis, trojan, 7),
            arrow(medmis, "bench_core.cli.main", 8),
        ],
        trojan: [arrow(trojan, "typer", 9)],
        generation: [arrow(generation, "bench_core.medmisbench.items"), arrow(generation, "bench_core.medmisbench")],
        "bench_core.medmisbench": [],
        "bench_core.mitigation.search": [
            arrow("bench_core.mitigation.search", "bench_core.medmisbench.items"),
            arrow("bench_core.mitigation.search", "bench_core.healthcontradict.data", 10),
        ],
        "bench_core.healthcontradict.data": [],
    }
    assert kernel_violations(graph) == [
        "bench_core.kernel.stats -> bench_core.medmisbench.items (line 2)",
        "bench_core.kernel.stats -> bench_core.cli (line 3)",
    ]
    assert design_violations(graph) == [
        "bench_core.medmisbench.run -> bench_core.trojan.run (line 7)",
        "bench_core.medmisbench.run -> bench_core.cli.main (line 8)",
        "bench_core.mitigation.search -> bench_core.healthcontradict.data (line 10)",
    ]
    assert several_designs_violations(graph) == [
        "bench_core.mitigation.search imports ['healthcontradict', 'medmisbench']"
    ]
    assert terminal_violations(graph) == [
        "bench_core.kernel.stats -> rich.console (line 4)",
        "bench_core.trojan.run -> typer (line 9)",
    ]
    assert review_app_violations(graph) == ["bench_core.kernel.runner -> review_app.db.models (line 6)"]

    public = {"bench_core.medmisbench": {"read_run", "taxonomy"}, "bench_core.trojan": {"load"}}
    views, services = "review_app.ui.views.study", "review_app.services.runs"
    uses = {
        views: [
            arrow(views, "bench_core.kernel.stats", 1, ("Proportion",)),
            arrow(views, "bench_core.medmisbench", 2, ("read_run",)),
            arrow(views, "bench_core.medmisbench.taxonomy", 3, ("taxonomy",)),
            arrow(views, "bench_core.trojan", 4, ("trojan",)),
            arrow(views, "bench_core.medmisbench.items", 5, ("items",)),
        ],
        services: [
            arrow(services, "bench_core.medmisbench", 6, ("read_run", "_private")),
            arrow(services, "bench_core.trojan.run", 7, ("load",)),
            arrow(services, "bench_core.cli", 8),
        ],
        "review_app.cli": [arrow("review_app.cli", "bench_core.cli")],
    }
    assert design_use_violations(uses, lambda package: public.get(package, set())) == [
        "review_app.ui.views.study -> bench_core.medmisbench.items (line 5) ['items']",
        "review_app.services.runs -> bench_core.medmisbench (line 6) ['read_run', '_private']",
        "review_app.services.runs -> bench_core.trojan.run (line 7) ['load']",
        "review_app.services.runs -> bench_core.cli (line 8) []",
    ]


@pytest.mark.parametrize("package", ["bench_core", "review_app"])
def test_no_import_cycles(package):
    cycles = import_cycles(internal_graph([n for n in MODULES if n.split(".")[0] == package]))
    shown = []
    for component in cycles:
        members = set(component)
        arrows = [str(a) for n in component for a in internal(n) if a.target in members]
        shown.append(" / ".join(component) + ":\n    " + "\n    ".join(arrows))
    assert cycles == [], f"import cycles in {package} (module- and function-level imports):\n" + "\n".join(shown)


def test_the_checks_see_what_they_check():
    """The parser resolves relative and function-level imports, and the cycle search finds a cycle."""
    assert "bench_core.kernel.stats" in {a.target for a in internal("review_app.analysis.proportions")}
    lazy = {a.target for a in internal("bench_core.cli.main")}
    assert {"bench_core.medmisbench.report", "bench_core.trojan.report"} <= lazy  # imported inside designs()
    source = (
        "def f():\n    from ..kernel import stats\n    from . import run, taxonomy\n    from .items import MCQItem\n"
    )
    relative = arrows_of(source, "bench_core.medmisbench.targets")
    assert [(a.target, a.names) for a in relative] == [
        ("bench_core.kernel.stats", ("stats",)),
        ("bench_core.medmisbench.run", ("run",)),
        ("bench_core.medmisbench.taxonomy", ("taxonomy",)),
        ("bench_core.medmisbench.items", ("MCQItem",)),
    ]
    in_init = arrows_of("from .run import read_run\n", "bench_core.medmisbench", is_package=True)
    assert [a.target for a in in_init] == ["bench_core.medmisbench.run"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# --- review_app: db -> services -> analysis -> ui (docs/architecture.md, "Import directions inside review_app") ---
# What each layer may not reach (FORBIDDEN_LAYERS, FORBIDDEN_LIBRARIES, PAGE_FORBIDDEN, SQL): tests/import_graph.py.


def test_review_app_layers_import_only_downwards():
    graph = {name: IMPORTS[name] for name in MODULES if name.startswith("review_app")}
    wrong = layer_violations(graph)
    assert wrong == [], (
        "review_app: db imports no services, analysis or ui; analysis is pure (no db, services, ui, ORM or "
        "Streamlit); services import no ui:\n" + "\n".join(wrong)
    )


def test_pages_reach_data_only_through_the_services():
    pages = [name for name in MODULES if is_page(name)]
    assert "review_app.ui.app" in pages and "review_app.ui.views.review" in pages
    wrong = [w for name in pages for w in page_violations(name, TREES[name], IMPORTS[name])]
    assert wrong == [], "pages import no review_app.db, sqlmodel or sqlalchemy and hold no SQL:\n" + "\n".join(wrong)


def test_lazily_imported_names_exist():
    packages = {name for name in MODULES if is_package_module(name)}
    declared = {(lazy.table, name) for name in MODULES for lazy in lazy_names(TREES[name])}
    assert {("lazy_commands", "review_app.cli"), ("_EXPORTS", "review_app.analysis")} <= declared
    assert ("LEAD_JOB_MODULES", "review_app.ui.session") in declared
    wrong = lazy_violations(TREES, packages)
    assert wrong == [], "names imported on first use must resolve:\n" + "\n".join(wrong)


def test_the_layer_rules_catch_planted_violations():
    """Each review_app rule fails on a graph that breaks it, also through a top-level module."""

    def arrow(source: str, target: str, line: int = 1) -> Arrow:
        return Arrow(source, target, line)

    graph = {
        "review_app.db.models": [arrow("review_app.db.models", "review_app.services.audit", 3)],
        "review_app.analysis.x": [
            arrow("review_app.analysis.x", "review_app.rubrics"),
            arrow("review_app.analysis.x", "streamlit", 2),
            arrow("review_app.analysis.x", "review_app.analysis.y", 4),
        ],
        "review_app.analysis.y": [arrow("review_app.analysis.y", "bench_core.kernel.stats")],
        "review_app.rubrics": [arrow("review_app.rubrics", "review_app.db.engine", 5)],
        "review_app.db.engine": [arrow("review_app.db.engine", "sqlalchemy")],
        "review_app.services.ok": [
            arrow("review_app.services.ok", "review_app.db.engine"),
            arrow("review_app.services.ok", "review_app.analysis.x"),
            arrow("review_app.services.ok", "review_app.rubrics"),
        ],
        "review_app.services.bad": [arrow("review_app.services.bad", "review_app.ui.session", 7)],
        "review_app.ui.session": [arrow("review_app.ui.session", "review_app.db.connect")],
    }
    assert layer_violations(graph) == [
        "analysis: review_app.analysis.x -> streamlit (line 2)",
        "analysis: review_app.analysis.x -> review_app.rubrics (line 1) -> "
        "review_app.rubrics -> review_app.db.engine (line 5)",
        "db: review_app.db.models -> review_app.services.audit (line 3)",
        "services: review_app.services.bad -> review_app.ui.session (line 7)",
    ]


def test_the_page_rule_catches_planted_violations():
    """Direct, relative and ORM imports and SQL in a page are caught; page text that reads like SQL is not."""
    name = "review_app.ui.views.planted"
    source = (
        "from ...db.models import Study\n"
        "import sqlalchemy\n"
        "from sqlmodel import select\n"
        "def rows(engine):\n"
        "    return engine.exec_driver_sql(f'SELECT id FROM study WHERE name = {engine}')\n"
        "PRAGMA = 'PRAGMA wal_checkpoint'\n"
        "HELP = 'Select a study from the list, then update the settings.'\n"
    )
    wrong = page_violations(name, source, arrows_of(source, name))
    assert wrong == [
        f"{name} -> review_app.db.models (line 1) imports review_app.db.models",
        f"{name} -> sqlalchemy (line 2) imports sqlalchemy",
        f"{name} -> sqlmodel (line 3) imports sqlmodel",
        f"{name} (line 5) holds SQL: 'SELECT id FROM study WHERE name = '",
        f"{name} (line 6) holds SQL: 'PRAGMA wal_checkpoint'",
    ]
    assert is_page("review_app.ui.app") and is_page(name)
    assert not is_page("review_app.ui.components.pickers") and not is_page("review_app.ui.session")
    clean = "from review_app.services import studies\nHELP = 'Select a study from the list.'\n"
    assert page_violations(name, clean, arrows_of(clean, name)) == []


def test_the_lazy_name_check_catches_planted_violations():
    """A missing module, attribute or submodule, an ``__all__`` out of step and a name type checkers do
    not see are each reported; lazy names count as imports for the other rules."""
    sources = {
        "pkg": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from pkg import sub\n"
            "    from pkg.mod import f\n"
            "__all__ = ['f', 'sub', 'gone', 'extra']\n"
            "_EXPORTS = {'f': ('pkg.mod', 'f'), 'sub': ('pkg', 'sub'), 'g': ('pkg.mod', 'only_typed'),\n"
            "            'gone': ('pkg', 'nothing'), 'h': ('pkg.missing', 'h')}\n"
        ),
        "pkg.mod": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import only_typed\ndef f(): ...\n"
        ),
        "pkg.sub": "",
        "pkg.cli": (
            "class Group:\n"
            "    lazy_commands = {'ok': ('pkg.mod', 'f', 'help'), 'bad': ('pkg.mod', 'app', 'help')}\n"
            "JOBS_JOB_MODULES = ('pkg.sub', 'pkg.renamed')\n"
        ),
    }
    trees = {name: ast.parse(source) for name, source in sources.items()}
    assert lazy_violations(trees, packages={"pkg"}) == [
        "pkg (line 6) _EXPORTS['g']: pkg.mod has no only_typed",
        "pkg (line 6) _EXPORTS['gone']: no module pkg.nothing",
        "pkg (line 6) _EXPORTS['h']: no module pkg.missing",
        "pkg: __all__ and _EXPORTS name different things",
        "pkg: g is not imported from pkg.mod under TYPE_CHECKING",
        "pkg: gone is not imported from pkg under TYPE_CHECKING",
        "pkg: h is not imported from pkg.missing under TYPE_CHECKING",
        "pkg.cli (line 2) lazy_commands['bad']: pkg.mod has no app",
        "pkg.cli (line 3) JOBS_JOB_MODULES['']: no module pkg.renamed",
    ]
    lazy = arrows_of(sources["pkg"], "pkg", is_package=True)
    assert {(a.target, a.names) for a in lazy} >= {("pkg.sub", ()), ("pkg.mod", ("f",)), ("pkg.missing", ("h",))}
    source = "_EXPORTS = {'x': ('review_app.services.reviewer_monitoring', 'x')}\n"
    planted = {"review_app.analysis": arrows_of(source, "review_app.analysis", is_package=True)}
    assert layer_violations(planted) == [
        "analysis: review_app.analysis -> review_app.services.reviewer_monitoring (line 1)"
    ]


# --- review_app: the ui passes the signed-in user to every service that takes one (docs/security.md,
# "Enforcement in the services: actor="): a service left at its default acts as the operator, who reads
# every study. The finder is tests/import_graph.py's calls_without_user.

# (module, the call as written): why it has no user. Empty: every page passes its user.
CALLS_WITHOUT_USER: dict[tuple[str, str], str] = {}


def test_the_ui_passes_the_user_to_every_service_that_takes_one():
    ui = [name for name in MODULES if name.startswith("review_app.ui")]
    found = [call for name in ui for call in calls_without_user(name, TREES[name], TREES)]
    wrong = [str(call) for call in found if (call.module, call.called) not in CALLS_WITHOUT_USER]
    assert wrong == [], (
        "pass the signed-in user (actor=user) to every service that takes one; a call that has no user is "
        "named, with why, in CALLS_WITHOUT_USER:\n" + "\n".join(wrong)
    )
    stale = sorted(set(CALLS_WITHOUT_USER) - {(call.module, call.called) for call in found})
    assert stale == [], f"these calls pass the user now: take them out of CALLS_WITHOUT_USER: {stale}"


def test_the_user_rule_catches_planted_violations():
    """Calls through a services module, a function imported by name (renamed too), a package's re-export and a
    ``**options`` TypedDict are caught without the user; a user given by keyword or at its position is not."""
    name = "review_app.ui.views.planted"
    source = (
        "from review_app.services import export, importing, progress, reviewer_monitoring\n"
        "from review_app.services.cached_analyses import cached_analysis as analysed\n"
        "progress.study_progress(db, 'A')\n"
        "progress.study_progress(db, 'A', actor=user)\n"
        "analysed(db, 'A', pending='exclude')\n"
        "export.pending_tasks(db, 'A')\n"
        "importing.import_upload(db, 'items.jsonl', data, **{'actor': user})\n"
        "reviewer_monitoring.quality_report(db, user, 'A')\n"
        "reviewer_monitoring.quality_report(db, *arguments)\n"
        "progress.behind_warnings([])\n"
        "print(progress.BEHIND_RATIO)\n"
    )
    assert [str(call) for call in calls_without_user(name, source, TREES)] == [
        str(CallWithoutUser(name, 3, "progress.study_progress")),
        str(CallWithoutUser(name, 5, "analysed")),
        str(CallWithoutUser(name, 6, "export.pending_tasks")),
        str(CallWithoutUser(name, 7, "importing.import_upload")),
        str(CallWithoutUser(name, 9, "reviewer_monitoring.quality_report")),
    ]
    assert acting("review_app.services.reviewer_monitoring", "quality_report", TREES).position == 1
    assert acting("review_app.services.importing", "import_upload", TREES).names == ("actor",)
    assert acting("review_app.services.progress", "behind_warnings", TREES) is None
