"""The bench_core layout rules of docs/architecture.md, as finders over an import graph.

Each finder takes the graph as plain data, module name -> its arrows (``tests/import_graph.py``'s
``IMPORTS`` for the tree), and returns one line per violation, so ``tests/test_architecture.py`` runs it
on the tree and on a planted violation. The keys of the graph are the modules of the tree: an arrow
whose target lies in none of them is an import of a library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tests.import_graph import Arrow, _nearest, layer

Graph = Mapping[str, Sequence[Arrow]]

DESIGNS = ("medmisbench", "healthcontradict", "trojan", "generation", "mitigation")
LAYERS = ("kernel", "cli", *DESIGNS)
ALLOWED_DESIGN_ARROWS = {("generation", "medmisbench"), ("mitigation", "medmisbench")}
# terminal output: rich only in cli/ and for the runner's progress bar (progress with rate and ETA)
RICH_OUTSIDE_CLI = {"bench_core.kernel.runner"}


def _bench_core(graph: Graph) -> list[str]:
    """The bench_core modules of the graph, in its order."""
    return [name for name in graph if name.startswith("bench_core")]


def _internal(graph: Graph, name: str) -> list[Arrow]:
    """The arrows from ``name`` to other modules of the graph, each target resolved to the module it lies in."""
    out = []
    for arrow in graph[name]:
        target = _nearest(arrow.target, graph)
        if target is not None and target != name:
            out.append(Arrow(arrow.source, target, arrow.line, arrow.names))
    return out


def kernel_violations(graph: Graph) -> list[str]:
    """Arrows from kernel/ to any module of the tree outside kernel/: a design, the CLI, bench_core itself."""
    return [
        str(a)
        for n in _bench_core(graph)
        if layer(n) == "kernel"
        for a in _internal(graph, n)
        if layer(a.target) != "kernel"
    ]


def design_violations(graph: Graph) -> list[str]:
    """Arrows from a design to the CLI, or to another design other than by ``ALLOWED_DESIGN_ARROWS``."""
    wrong = []
    for name in _bench_core(graph):
        source = layer(name)
        if source not in DESIGNS:
            continue
        for arrow in _internal(graph, name):
            target = layer(arrow.target)
            if target == "cli" or (
                target in DESIGNS and target != source and (source, target) not in ALLOWED_DESIGN_ARROWS
            ):
                wrong.append(str(arrow))
    return wrong


def several_designs_violations(graph: Graph) -> list[str]:
    """Modules outside cli/ that import two designs or more (their own design not counted)."""
    wrong = []
    for name in _bench_core(graph):
        if layer(name) == "cli":
            continue
        designs = {layer(a.target) for a in _internal(graph, name)} & set(DESIGNS)
        designs.discard(layer(name))
        if len(designs) > 1:
            wrong.append(f"{name} imports {sorted(designs)}")
    return wrong


def terminal_violations(graph: Graph) -> list[str]:
    """Imports of typer, click or rich outside cli/ (rich also in ``RICH_OUTSIDE_CLI``)."""
    wrong = []
    for name in _bench_core(graph):
        if layer(name) == "cli":
            continue
        for arrow in graph[name]:
            top = arrow.target.split(".")[0]
            if top in ("typer", "click") or (top == "rich" and name not in RICH_OUTSIDE_CLI):
                wrong.append(str(arrow))
    return wrong


def review_app_violations(graph: Graph) -> list[str]:
    """Arrows from bench_core to review_app."""
    return [str(a) for n in _bench_core(graph) for a in graph[n] if a.target.split(".")[0] == "review_app"]


def design_use_violations(graph: Graph, public_names: Callable[[str], set[str]]) -> list[str]:
    """review_app's imports of bench_core other than a kernel module, a design's public ``__init__`` or the CLI
    group (``medrev`` mounts it); shown with the names taken.

    ``public_names``: a design package -> its ``__all__``. ``from bench_core.<design> import x`` must take
    names in it, ``from bench_core import <design>`` takes the package itself, and a submodule (e.g.
    ``taxonomy``) counts only when the ``__all__`` names it.
    """
    wrong = []
    for name in (n for n in graph if n.startswith("review_app")):
        for arrow in graph[name]:
            target = arrow.target
            if not target.startswith("bench_core"):
                continue
            parts = target.split(".")
            if len(parts) >= 3 and parts[1] == "kernel":
                continue
            if name == "review_app.cli" and target == "bench_core.cli":
                continue
            package = ".".join(parts[:2])
            if (
                len(parts) == 2
                and parts[1] in DESIGNS
                and (arrow.names == (parts[1],) or set(arrow.names) <= public_names(package))
            ):
                continue
            if len(parts) == 3 and parts[1] in DESIGNS and parts[2] in public_names(package) and arrow.names:
                continue
            wrong.append(f"{arrow} {list(arrow.names)}")
    return wrong
