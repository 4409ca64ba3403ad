"""The layout rules of SPEC section 0, checked on the import statements of the source tree.

Imports are read with ``ast``: every ``import`` and ``from ... import`` anywhere in a module (also inside
functions, where the CLI and the services import lazily), relative imports resolved against the module's
package. ``from package import name`` counts as importing the submodule ``package.name`` when there is
one, else the package itself (its ``__init__``). Importing a submodule is not counted as importing the
packages above it (Python runs their ``__init__`` first, but that is not an arrow the code chose).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGNS = ("medmisbench", "healthcontradict", "trojan", "generation", "mitigation")
LAYERS = ("kernel", "cli", *DESIGNS)
ALLOWED_DESIGN_ARROWS = {("generation", "medmisbench"), ("mitigation", "medmisbench")}
# terminal output: rich only in cli/ and for the runner's progress bar (SPEC 1.6: progress with rate and ETA)
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


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _known(name: str) -> str | None:
    """The nearest module of the tree that ``name`` lies in (``bench_core.kernel.stats.Proportion`` -> the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def arrows_of(source: str, name: str, *, is_package: bool = False) -> list[Arrow]:
    """Every import in ``source`` (module ``name``) as an arrow; relative imports resolved, external names kept."""
    package = name if is_package else name.rpartition(".")[0]
    arrows: list[Arrow] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            arrows += [Arrow(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            plain = []
            for alias in node.names:
                if f"{module}.{alias.name}" in MODULES:
                    arrows.append(Arrow(name, f"{module}.{alias.name}", node.lineno, (alias.name,)))
                else:
                    plain.append(alias.name)
            if plain:
                arrows.append(Arrow(name, module, node.lineno, tuple(plain)))
    return arrows


def imports(name: str) -> list[Arrow]:
    return arrows_of(MODULES[name].read_text(encoding="utf-8"), name, is_package=_is_package(name))


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
    """A file directly in bench_core/ belongs in a design, the kernel or the CLI (SPEC 0: where new code goes)."""
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
    tree = ast.parse(MODULES[package].read_text(encoding="utf-8"))
    for node in tree.body:
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
