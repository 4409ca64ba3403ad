"""The import graph of the source tree, and the finders that check it against docs/architecture.md.

Imports are read with ``ast``: every ``import`` and ``from ... import`` anywhere in a module (also inside
functions, where the CLI and the services import lazily), relative imports resolved against the module's
package. ``from package import name`` counts as importing the submodule ``package.name`` when there is
one, else the package itself (its ``__init__``). Importing a submodule is not counted as importing the
packages above it (Python runs their ``__init__`` first, but that is not an arrow the code chose).

Modules named in strings and imported on first use count as imports too (:func:`lazy_names`): a
package's ``_EXPORTS`` map (``bench_core.kernel.lazy``), a command group's ``lazy_commands`` and the
``*_JOB_MODULES`` a compute worker imports when it starts. The finders are functions of plain data
(arrows, source text), so ``tests/test_architecture.py`` runs each on the tree and on a planted violation.
One reads calls rather than imports: :func:`calls_without_user`, the ui's calls to a service that takes
the acting user without giving it (docs/security.md, "Enforcement in the services: actor=").
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``line``; shown as the message a broken rule prints."""

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


def is_package_module(name: str) -> bool:
    """Whether a module of the tree is a package's ``__init__`` (its relative imports start from itself)."""
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
    """The arrows of a module of the tree, read once into :data:`IMPORTS`."""
    return arrows_of(TREES[name], name, is_package=is_package_module(name))


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


def public_names(package: str) -> set[str]:
    """A package's ``__all__``: what the review app may take from a design without reaching inside it."""
    for node in TREES[package].body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def internal_graph(names: list[str]) -> dict[str, set[str]]:
    """Module -> the modules among ``names`` it imports, for the cycle search."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name in names:
        for arrow in internal(name):
            if arrow.target in names:
                graph[name].add(arrow.target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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



# --- review_app: the ui passes the signed-in user to every service that takes one (docs/security.md) ---

ACTING_PARAMETERS = ("actor", "actor_id", "lead_id")
"""The names a service takes the acting user under (``actor``; ``actor_id`` and ``lead_id`` are older spellings)."""


@dataclass(frozen=True)
class Acting:
    """How a service function takes the acting user: by keyword under one of ``names``, or at ``position``
    (None: by keyword only)."""

    names: tuple[str, ...]
    position: int | None


def _defined(module: str, name: str, trees: Mapping[str, ast.Module], depth: int = 0) -> tuple[str, ast.stmt] | None:
    """The module and statement that define ``module.name``, through re-exports (``from x import name`` at the
    top level, also under ``if TYPE_CHECKING:``, and a package's ``_EXPORTS``)."""
    tree = trees.get(module)
    if tree is None or depth > 8:
        return None
    body = [*tree.body, *(s for n in tree.body if isinstance(n, ast.If) for s in n.body)]
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return module, node
    package = module if is_package_module(module) else module.rpartition(".")[0]
    for node in body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _defined(_from_module(node, package), alias.name, trees, depth + 1)
    for lazy in lazy_names(tree):
        if lazy.table == "_EXPORTS" and lazy.key == name and lazy.attribute is not None:
            return _defined(lazy.module, lazy.attribute, trees, depth + 1)
    return None


def _typed_keys(module: str, annotation: ast.expr | None, trees: Mapping[str, ast.Module]) -> set[str]:
    """The keys of the ``TypedDict`` in ``**options: Unpack[...]`` (none for any other annotation)."""
    if not (isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Name)):
        return set()
    found = _defined(module, annotation.slice.id, trees)
    if found is None or not isinstance(found[1], ast.ClassDef):
        return set()
    return {s.target.id for s in found[1].body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def acting(module: str, name: str, trees: Mapping[str, ast.Module]) -> Acting | None:
    """How the service function ``module.name`` takes the acting user, or None when it takes none.

    A keyword a ``**options: Unpack[TypedDict]`` carries counts as a keyword-only parameter.
    """
    found = _defined(module, name, trees)
    if found is None or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    where, function = found
    args = function.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    keywords = [*positional, *(a.arg for a in args.kwonlyargs)]
    if args.kwarg is not None:
        keywords += sorted(_typed_keys(where, args.kwarg.annotation, trees))
    names = tuple(n for n in keywords if n in ACTING_PARAMETERS)
    if not names:
        return None
    return Acting(names, next((i for i, n in enumerate(positional) if n in ACTING_PARAMETERS), None))


@dataclass(frozen=True)
class CallWithoutUser:
    """A call in ``module`` at ``line`` to a service function (``called``, as written) that is not given the user."""

    module: str
    line: int
    called: str

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}) calls {self.called} without the user: pass actor="


def calls_without_user(
    name: str, source: str | ast.Module, trees: Mapping[str, ast.Module]
) -> list[CallWithoutUser]:
    """The calls in ``name`` (a module of review_app/ui) to a service function that takes the acting user and
    is not given it: neither by keyword nor at its position.

    The function is resolved through the module's imports (``from review_app.services import progress``,
    then ``progress.study_progress(...)``; ``from review_app.services.x import f``, then ``f(...)``) and the
    services' re-exports. A ``**mapping`` in the call does not count: the rule reads the user in the call.
    """
    tree = ast.parse(source) if isinstance(source, str) else source
    package = name.rpartition(".")[0]
    modules: dict[str, str] = {}  # local name -> module
    functions: dict[str, tuple[str, str]] = {}  # local name -> (module, attribute)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{module}.{alias.name}" in trees:
                    modules[local] = f"{module}.{alias.name}"
                else:
                    functions[local] = (module, alias.name)
        elif isinstance(node, ast.Import):
            modules.update({a.asname: a.name for a in node.names if a.asname and a.name in trees})
    wrong = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) and called.value.id in modules:
            target, shown = (modules[called.value.id], called.attr), f"{called.value.id}.{called.attr}"
        elif isinstance(called, ast.Name) and called.id in functions:
            target, shown = functions[called.id], called.id
        else:
            continue
        if not target[0].startswith("review_app.services"):
            continue
        how = acting(*target, trees)
        if how is None or any(k.arg in how.names for k in node.keywords):
            continue
        given = next((i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)), len(node.args))
        if how.position is not None and how.position < given:
            continue
        wrong.append(CallWithoutUser(name, node.lineno, shown))
    return sorted(wrong, key=lambda call: call.line)
