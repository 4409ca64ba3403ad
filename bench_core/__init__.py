"""bench_core: benchmark data, prompts, model evaluation and benchmark metrics for medrev.

One package per benchmark design over a small kernel: ``medmisbench``, ``healthcontradict``,
``trojan``, ``generation`` (building MedMisBench-style benchmarks) and ``mitigation`` (search tools),
each with role-named modules (data, prompts, run, metrics, report); ``kernel`` holds what designs
share and names none of them; ``cli`` is the ``bench`` command group, the one layer that imports
several designs. Code outside bench_core uses the designs' ``__init__`` and the kernel. Nothing here
imports ``review_app``. ``tests/test_architecture.py`` checks these rules.
"""

__version__ = "0.1.0"
