"""A package's public names imported on first use (PEP 562), so importing the package loads none of them.

``medrev --help`` stays fast because a package's ``__init__`` no longer imports every module it
re-exports. One trap comes with it: a public name that is also a submodule's name is rebound to the
module as soon as anything imports that submodule, so such names are refused here (export the
submodule itself, or import the name from its module).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def lazy_exports(
    package: str, namespace: MutableMapping[str, Any], exports: Mapping[str, tuple[str, str]]
) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``exports`` maps a public name to (module, attribute).

    A pair naming the package itself, ``(package, "sub")``, exports its submodule ``sub``. The value is
    stored in ``namespace`` (the package's ``globals()``) on first use, so later lookups are plain.
    """
    clashes = [name for name, (module, _attr) in exports.items() if module != package and module == f"{package}.{name}"]
    if clashes:
        raise ValueError(f"{package}: {', '.join(clashes)} would be rebound to the submodule of that name")

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = exports[name]
        if module == package:
            value = importlib.import_module(f"{package}.{attr}")
        else:
            value = getattr(importlib.import_module(module), attr)
        namespace[name] = value
        return value

    return __getattr__
