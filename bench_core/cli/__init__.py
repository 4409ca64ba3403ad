"""The ``bench`` command group: the one layer that imports several designs; flags and terminal output live here.

``app`` is the group that ``medrev bench`` mounts (``review_app.cli``) and ``python -m bench_core`` runs.
"""

from bench_core.cli.errors import DEBUG_HELP, MedrevGroup, debug_option
from bench_core.cli.main import app

__all__ = ["DEBUG_HELP", "MedrevGroup", "app", "debug_option"]
