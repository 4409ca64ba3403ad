"""``python -m bench_core ...`` runs the ``bench`` command group (same as ``medrev bench ...``)."""

from bench_core.cli import app

app(prog_name="python -m bench_core")
