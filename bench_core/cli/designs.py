"""Which benchmark a run directory belongs to, and its report builder and presenters.

Each design keeps its own item file beside the shared ``runs.jsonl``/``results.jsonl``: MedMisBench
``items.jsonl``, HealthContradict ``instances.jsonl``, Trojan ``records.json``. ``bench report``
asks this module, so one command reports any run directory (or a folder of them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console


@dataclass(frozen=True)
class Design:
    """How to report one benchmark's run directory."""

    benchmark: str
    is_run_dir: Callable[[Path], bool]
    build: Callable[[Path], dict[str, Any]]
    print_report: Callable[[dict[str, Any], Console], None]
    write_report: Callable[..., list[Path]]


def _medmisbench() -> Design:
    from bench_core.medmisbench import report
    from bench_core.medmisbench.metrics import medmisbench_report
    from bench_core.medmisbench.run import is_run_dir, read_run_data

    return Design(
        "medmisbench",
        is_run_dir,
        lambda d: medmisbench_report(read_run_data(d)),
        report.print_report,
        report.write_report,
    )


def _healthcontradict() -> Design:
    from bench_core.healthcontradict import report as presenter
    from bench_core.healthcontradict.metrics import healthcontradict_report
    from bench_core.healthcontradict.run import is_run_dir, read_run_data

    return Design(
        "healthcontradict",
        is_run_dir,
        lambda d: healthcontradict_report(read_run_data(d)),
        presenter.print_report,
        presenter.write_report,
    )


def _trojan() -> Design:
    from bench_core.trojan import report as presenter
    from bench_core.trojan.metrics import trojan_report
    from bench_core.trojan.run import is_run_dir, read_run_data

    return Design(
        "trojan", is_run_dir, lambda d: trojan_report(read_run_data(d)), presenter.print_report, presenter.write_report
    )


DESIGNS: tuple[Callable[[], Design], ...] = (_medmisbench, _healthcontradict, _trojan)


def design_of(path: Path) -> Design | None:
    """The design whose run directory ``path`` is, or None."""
    for make in DESIGNS:
        design = make()
        if design.is_run_dir(path):
            return design
    return None


def find_run_dirs(directory: Path) -> list[tuple[Path, Design]]:
    """``directory`` itself if it is a run directory, else its run-directory children (sorted)."""
    own = design_of(directory)
    if own is not None:
        return [(directory, own)]
    found = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        design = design_of(child)
        if design is not None:
            found.append((child, design))
    return found
