"""What `make demo` installs compared with `make test`: installed size of each dependency set.

Walks the requirement graph of the medrev distribution in this virtual environment (``pip install
-e .`` for the demo, ``-e .[dev]`` for the tests) and sums the installed files of every distribution
reached (from their RECORD files). Run after `make test` (the full set must be installed):

    .venv/bin/python bench/install_size.py
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _closure(root: str, extras: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = [(root, frozenset(extras))]
    env = default_environment()
    while todo:
        name, wanted = todo.pop()
        key = (_name(name), wanted)
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(
                req.marker.evaluate(env | {"extra": extra}) for extra in (wanted or {""})
            ):
                continue
            todo.append((req.name, frozenset(req.extras)))
    return {name for name, _extras in seen}


def _size(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(dist.locate_file(file))
        if path.is_file():
            total += path.stat().st_size
    return total


def main() -> None:
    demo = _closure("medrev", set())
    full = _closure("medrev", {"dev"})
    sizes = {name: _size(name) for name in full if _installed(name)}
    demo_mb = sum(sizes.get(n, 0) for n in demo) / 1e6
    full_mb = sum(sizes.values()) / 1e6
    print(f"make demo installs {len(demo)} distributions, {demo_mb:.0f} MB")
    print(f"make test installs {len(full)} distributions, {full_mb:.0f} MB")
    print(f"ratio demo/test: {demo_mb / full_mb:.2f}")
    extra = sorted(((sizes[n], n) for n in full - demo if n in sizes), reverse=True)[:8]
    print("largest test-only distributions: " + ", ".join(f"{n} {s / 1e6:.0f} MB" for s, n in extra))
    print("torch in demo set:", "torch" in demo, "| transformers in demo set:", "transformers" in demo)


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main()
