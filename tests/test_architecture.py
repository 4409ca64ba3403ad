"""The layout rules of docs/architecture.md, checked on the import statements of the source tree.

Imports are read with ``ast``: every ``import`` and ``from ... import`` anywhere in a module (also inside
functions, where the CLI and the services import lazily), relative imports resolved against the module's
package. ``from package import name`` counts as importing the submodule ``package.name`` when there is
one, else the package itself (its ``__init__``). Importing a submodule is not counted as importing the
packages above it (Python runs their ``__init__`` first, but that is not an arrow the code chose).

Modules named in strings and imported on first use count as imports too (:func:`lazy_names`): a
package's ``_EXPORTS`` map (``bench_core.kernel.lazy``), a command group's ``lazy_commands`` and the
``*_JOB_MODULES`` a compute worker imports when it starts. Each rule's checker is a function of plain
data (arrows, source text), run on the tree and, in a test of its own, on a planted violation.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGNS = ("medmisbench", "healthcontradict", "trojan", "generation", "mitigation")
LAYERS = ("kernel", "cli", *DESIGNS)
ALLOWED_DESIGN_ARROWS = {("generation", "medmisbench"), ("mitigation", "medmisbench")}
# terminal output: rich only in cli/ and for the runner's progress bar (progress with rate and ETA)
RICH_OUTSIDE_CLI = {"bench_core.kernel.runner"}


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    line: int
    names: tuple[str, ...] = ()  # for ``from package import a, b``: the names taken from the package

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of a top-level package (``__init__`` names the package)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = {**modules("bench_core"), **modules("review_app")}
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _nearest(name: str, names: Mapping[str, object]) -> str | None:
    """The nearest of ``names`` that ``name`` lies in (``bench_core.kernel.stats.Proportion`` -> the module)."""
    while name and name not in names:
        name = name.rpartition(".")[0]
    return name or None


def _known(name: str) -> str | None:
    """The nearest module of the tree that ``name`` lies in."""
    return _nearest(name, MODULES)


@dataclass(frozen=True)
class LazyName:
    """A module (and attribute) named in a string and imported on first use."""

    table: str  # _EXPORTS, lazy_commands or a *_JOB_MODULES tuple
    key: str  # the public name or command ("" for a job module)
    module: str
    attribute: str | None  # None: the module itself
    line: int


def lazy_names(tree: ast.Module) -> list[LazyName]:
    """The lazily imported names a module declares, read from its literal maps (anywhere, class bodies too)."""
    found: list[LazyName] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for table in (t.id for t in targets if isinstance(t, ast.Name)):
            if table == "_EXPORTS":
                entries = ast.literal_eval(node.value)
                found += [LazyName(table, k, m, a, node.lineno) for k, (m, a) in entries.items()]
            elif table == "lazy_commands":
                entries = ast.literal_eval(node.value)
                found += [LazyName(table, k, m, a, node.lineno) for k, (m, a, _help) in entries.items()]
            elif table.endswith("_JOB_MODULES"):
                found += [LazyName(table, "", m, None, node.lineno) for m in ast.literal_eval(node.value)]
    return sorted(found, key=lambda lazy: lazy.line)


def _lazy_target(lazy: LazyName, holder: str) -> str:
    """The module a lazy name imports: ``(package, "sub")`` in a package's own ``_EXPORTS`` is its submodule."""
    if lazy.table == "_EXPORTS" and lazy.module == holder:
        return f"{holder}.{lazy.attribute}"
    return lazy.module


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` reads, a relative one resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def arrows_of(source: str | ast.Module, name: str, *, is_package: bool = False) -> list[Arrow]:
    """Every import in ``source`` (module ``name``, text or parsed) as an arrow; relative imports resolved,
    external names kept."""
    package = name if is_package else name.rpartition(".")[0]
    arrows: list[Arrow] = []
    tree = ast.parse(source) if isinstance(source, str) else source
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            arrows += [Arrow(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
            plain = []
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    arrows.append(Arrow(name, f"{module}.{alias.name}", node.lineno, (alias.name,)))
                else:
                    plain.append(alias.name)
            if plain:
                arrows.append(Arrow(name, module, node.lineno, tuple(plain)))
    for lazy in lazy_names(tree):
        target = _lazy_target(lazy, name)
        names = () if lazy.attribute is None or target != lazy.module else (lazy.attribute,)
        arrows.append(Arrow(name, target, lazy.line, names))
    return arrows


def imports(name: str) -> list[Arrow]:
    return arrows_of(TREES[name], name, is_package=_is_package(name))


IMPORTS = {name: imports(name) for name in MODULES}


def internal(name: str) -> list[Arrow]:
    """The arrows from ``name`` to other modules of the tree, targets resolved to a module."""
    out = []
    for arrow in IMPORTS[name]:
        target = _known(arrow.target)
        if target is not None and target != name:
            out.append(Arrow(arrow.source, target, arrow.line, arrow.names))
    return out


def layer(name: str) -> str | None:
    """``kernel``, ``cli`` or a design for a bench_core module (None for bench_core's own __init__/__main__)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "bench_core" and len(parts) > 1 and parts[1] != "__main__" else None


def bench_core_modules() -> list[str]:
    return [name for name in MODULES if name.startswith("bench_core")]


def test_bench_core_top_level_holds_only_packages():
    """A file directly in bench_core/ belongs in a design, the kernel or the CLI (docs/architecture.md)."""
    loose = sorted(p.name for p in (ROOT / "bench_core").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert loose == [], f"move these into a design package, kernel/ or cli/: {loose}"
    packages = sorted(p.name for p in (ROOT / "bench_core").iterdir() if (p / "__init__.py").is_file())
    assert packages == sorted(LAYERS), f"bench_core packages {packages}; a new one must be a design or fit one"


def test_kernel_imports_no_design_and_no_cli():
    wrong = [
        str(a) for n in bench_core_modules() if layer(n) == "kernel" for a in internal(n) if layer(a.target) != "kernel"
    ]
    assert wrong == [], "kernel/ imports only kernel/ (a design-specific need belongs in the design):\n" + "\n".join(
        wrong
    )


def test_designs_import_each_other_only_as_allowed():
    wrong = []
    for name in bench_core_modules():
        source = layer(name)
        if source not in DESIGNS:
            continue
        for arrow in internal(name):
            target = layer(arrow.target)
            if target == "cli" or (
                target in DESIGNS and target != source and (source, target) not in ALLOWED_DESIGN_ARROWS
            ):
                wrong.append(str(arrow))
    assert wrong == [], "designs import only the kernel, generation -> medmisbench and mitigation -> medmisbench:\n" + (
        "\n".join(wrong)
    )


def test_only_the_cli_imports_several_designs():
    wrong = []
    for name in bench_core_modules():
        if layer(name) == "cli":
            continue
        designs = {layer(a.target) for a in internal(name)} & set(DESIGNS)
        designs.discard(layer(name))
        if len(designs) > 1:
            wrong.append(f"{name} imports {sorted(designs)}")
    assert wrong == [], "only cli/ may import two designs:\n" + "\n".join(wrong)


def test_flags_and_terminal_output_live_in_the_cli():
    wrong = []
    for name in bench_core_modules():
        if layer(name) == "cli":
            continue
        for arrow in IMPORTS[name]:
            top = arrow.target.split(".")[0]
            if top in ("typer", "click") or (top == "rich" and name not in RICH_OUTSIDE_CLI):
                wrong.append(str(arrow))
    assert wrong == [], "typer and rich belong in cli/ (designs return data; cli/ prints it):\n" + "\n".join(wrong)


def test_bench_core_never_imports_review_app():
    wrong = [str(a) for n in bench_core_modules() for a in IMPORTS[n] if a.target.split(".")[0] == "review_app"]
    assert wrong == []


def _public_names(package: str) -> set[str]:
    for node in TREES[package].body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def test_review_app_uses_designs_through_their_public_init_and_the_kernel():
    wrong = []
    for name in (n for n in MODULES if n.startswith("review_app")):
        for arrow in IMPORTS[name]:
            target = arrow.target
            if not target.startswith("bench_core"):
                continue
            parts = target.split(".")
            if len(parts) >= 3 and parts[1] == "kernel":
                continue
            if name == "review_app.cli" and target == "bench_core.cli":
                continue  # medrev mounts the bench group
            package = ".".join(parts[:2])
            if (
                len(parts) == 2
                and parts[1] in DESIGNS
                and (arrow.names == (parts[1],) or set(arrow.names) <= _public_names(package))
            ):
                continue  # ``from bench_core import <design>``, ``from bench_core.<design> import <public names>``
            if len(parts) == 3 and parts[1] in DESIGNS and parts[2] in _public_names(package) and arrow.names:
                continue  # ``from bench_core.<design> import <public submodule>`` (e.g. taxonomy)
            wrong.append(f"{arrow} {list(arrow.names)}")
    assert wrong == [], (
        "review_app imports bench_core only through a design's public __init__ (names in its __all__) and "
        "kernel modules:\n" + "\n".join(wrong)
    )


def _graph(names: list[str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for name in names:
        for arrow in internal(name):
            if arrow.target in names:
                graph[name].add(arrow.target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds an import cycle."""
    names = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(names):
        if name not in index:
            visit(name)
    return found


@pytest.mark.parametrize("package", ["bench_core", "review_app"])
def test_no_import_cycles(package):
    cycles = _cycles(_graph([n for n in MODULES if n.split(".")[0] == package]))
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
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# --- review_app: db -> services -> analysis -> ui (docs/architecture.md, "Import directions inside review_app") ---

REVIEW_APP_LAYERS = ("db", "services", "analysis", "ui")
# what a layer's modules may not reach: other layers of review_app, and libraries
FORBIDDEN_LAYERS = {
    "db": {"services", "analysis", "ui"},
    "analysis": {"db", "services", "ui"},  # pure: DataFrames in, results out (``medrev stats`` runs it on CSV)
    "services": {"ui"},
}
FORBIDDEN_LIBRARIES = {
    "db": {"streamlit"},
    "analysis": {"streamlit", "sqlalchemy", "sqlmodel", "alembic", "psycopg"},
    "services": {"streamlit"},  # plain results, for the pages and the command line alike
}
# pages reach data only through the services
PAGE_FORBIDDEN = ("review_app.db", "sqlmodel", "sqlalchemy")
# SQL as code writes it (upper-case keywords), not page text such as "Select a study from the list"
SQL = re.compile(
    r"\bSELECT\b[\s\S]*?\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\b(?:CREATE|DROP|ALTER)\s+(?:TABLE|INDEX|VIEW)\b|\bPRAGMA\b"
)


def review_layer(name: str) -> str | None:
    """``db``, ``services``, ``analysis`` or ``ui`` for a review_app module (None for the top-level modules)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "review_app" and len(parts) > 1 and parts[1] in REVIEW_APP_LAYERS else None


def layer_violations(graph: Mapping[str, Sequence[Arrow]]) -> list[str]:
    """Every arrow by which a review_app layer reaches what it must not (``FORBIDDEN_*``).

    ``graph``: module -> its arrows. A layer also reaches what the top-level modules it imports reach
    (``rubrics``, ``config``, ``errors``: no layer of their own), so a forbidden import is not laundered
    through them; the chain is shown.
    """
    wrong = []
    for name in sorted(graph):
        layer_ = review_layer(name)
        if layer_ not in FORBIDDEN_LAYERS:
            continue
        seen = {name}
        stack: list[tuple[str, tuple[str, ...]]] = [(name, ())]
        while stack:
            module, via = stack.pop()
            for arrow in graph.get(module, ()):
                reached = review_layer(arrow.target)
                if reached in FORBIDDEN_LAYERS[layer_] or arrow.target.split(".")[0] in FORBIDDEN_LIBRARIES[layer_]:
                    wrong.append(f"{layer_}: " + " -> ".join((*via, str(arrow))))
                elif reached is None and arrow.target.startswith("review_app"):
                    target = _nearest(arrow.target, graph)
                    if target is not None and target not in seen:
                        seen.add(target)
                        stack.append((target, (*via, str(arrow))))
    return wrong


def is_page(name: str) -> bool:
    """A Streamlit script: the entry page or one of ``ui/views``."""
    return name == "review_app.ui.app" or name.startswith("review_app.ui.views.")


def page_violations(name: str, source: str | ast.Module, arrows: Sequence[Arrow]) -> list[str]:
    """A page's imports of the database layer or the ORM, and its SQL strings."""
    wrong = [
        f"{arrow} imports {arrow.target}"
        for arrow in arrows
        if any(arrow.target == f or arrow.target.startswith(f"{f}.") for f in PAGE_FORBIDDEN)
    ]
    tree = ast.parse(source) if isinstance(source, str) else source
    strings = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for node in sorted(strings, key=lambda n: (n.lineno, n.col_offset)):
        if SQL.search(node.value):
            wrong.append(f"{name} (line {node.lineno}) holds SQL: {node.value[:60]!r}")
    return wrong


def _bound_names(body: Sequence[ast.stmt]) -> set[str]:
    """The names a module's top level binds when it runs (an ``if TYPE_CHECKING:`` block binds none)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                names |= _bound_names(node.body) | _bound_names(node.orelse)
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            names |= _bound_names([*node.body, *handlers, *node.orelse, *node.finalbody])
        elif isinstance(node, ast.With):
            names |= _bound_names(node.body)
    return names


def _type_checking_imports(tree: ast.Module, name: str, *, is_package: bool) -> set[tuple[str, str]]:
    """(module, name) of each ``from module import name`` under ``if TYPE_CHECKING:`` (relative ones resolved)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            package = name if is_package else name.rpartition(".")[0]
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    module = _from_module(statement, package)
                    found |= {(module, alias.name) for alias in statement.names}
    return found


def lazy_violations(trees: Mapping[str, ast.Module], packages: set[str]) -> list[str]:
    """Lazily imported names that would fail on first use, or that type checkers see otherwise.

    Each names a module of the tree and an attribute its top level binds (or that its own ``_EXPORTS``
    serves); a package's ``_EXPORTS`` keys are its ``__all__``, each imported under ``TYPE_CHECKING``
    from the same place.
    """
    declared = {name: lazy_names(tree) for name, tree in trees.items()}
    public = {
        name: _bound_names(tree.body) | {lazy.key for lazy in declared[name] if lazy.table == "_EXPORTS"}
        for name, tree in trees.items()
    }
    wrong = []
    for holder in sorted(trees):
        for lazy in declared[holder]:
            where = f"{holder} (line {lazy.line}) {lazy.table}[{lazy.key!r}]"
            target = _lazy_target(lazy, holder)
            if target not in trees:
                wrong.append(f"{where}: no module {target}")
            elif target == lazy.module and lazy.attribute is not None and lazy.attribute not in public[target]:
                wrong.append(f"{where}: {target} has no {lazy.attribute}")
        exports = {lazy.key: lazy for lazy in declared[holder] if lazy.table == "_EXPORTS"}
        if not exports:
            continue
        for node in trees[holder].body:
            is_all = isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
            if is_all and set(ast.literal_eval(node.value)) != set(exports):
                wrong.append(f"{holder}: __all__ and _EXPORTS name different things")
        checked = _type_checking_imports(trees[holder], holder, is_package=holder in packages)
        for key, lazy in exports.items():
            if (lazy.module, lazy.attribute) not in checked:
                wrong.append(f"{holder}: {key} is not imported from {lazy.module} under TYPE_CHECKING")
    return wrong


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
    packages = {name for name in MODULES if _is_package(name)}
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
