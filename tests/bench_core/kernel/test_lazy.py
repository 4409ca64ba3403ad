"""Lazy package exports: loaded on first use, cached, and no public name shadowed by its submodule."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bench_core.kernel.lazy import lazy_exports

LAZY_PACKAGES = ("bench_core.cli", "bench_core.medmisbench", "review_app.analysis")


def test_a_name_is_imported_on_first_use_and_kept():
    namespace: dict = {}
    getattr_ = lazy_exports("pkg", namespace, {"dumps": ("json", "dumps"), "path": ("os", "path")})
    import json

    assert getattr_("dumps") is json.dumps
    assert namespace["dumps"] is json.dumps
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr_("nothing")


def test_a_public_name_that_is_also_a_submodule_is_refused():
    # importing review_app.analysis.agreement rebinds the package's 'agreement' to that module
    with pytest.raises(ValueError, match="agreement would be rebound"):
        lazy_exports("review_app.analysis", {}, {"agreement": ("review_app.analysis.agreement", "agreement")})


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_export_of_the_lazy_packages_resolves(package):
    module = importlib.import_module(package)
    for name in module._EXPORTS:
        assert getattr(module, name) is not None, name


def test_importing_the_packages_loads_none_of_their_modules():
    code = (
        "import sys, bench_core.medmisbench, review_app.analysis; "
        "print(sorted(m for m in sys.modules if m.startswith(('bench_core.medmisbench.', 'review_app.analysis.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
