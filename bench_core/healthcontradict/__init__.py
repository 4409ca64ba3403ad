"""HealthContradict (knowledge conflicts): yes/no health questions under no, correct, incorrect or mixed documents.

The public face of the design. Inside: ``items`` (the typed records), ``data`` (queries, documents,
pairing), ``prompts`` (the five templates), ``scoring`` (YES/NO and its probability), ``hf_logits``
(local models; needs the ``hf`` extra and is imported only when used), ``run``, ``metrics`` and
``report``.
"""

from bench_core.healthcontradict.data import load_healthcontradict
from bench_core.healthcontradict.items import HCDataset, HCInstance
from bench_core.healthcontradict.run import HCPrediction, HCRunData, RunDirError, is_run_dir, read_run_data

__all__ = [
    "HCDataset",
    "HCInstance",
    "HCPrediction",
    "HCRunData",
    "RunDirError",
    "is_run_dir",
    "load_healthcontradict",
    "read_run_data",
]
