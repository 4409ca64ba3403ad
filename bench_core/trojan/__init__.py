"""Retracted-paper contamination ("Trojan paper"): does a model rely on retracted medical findings.

The public face of the design (what the review app's judge audit uses). Inside: ``data`` (records and
their provenance), ``prompts`` (the seed's prompts, verbatim), ``judging`` (reading the judge),
``run`` (two stages and the run directory), ``metrics`` and ``report``.
"""

from bench_core.trojan.data import RetractedRecord, load_retracted
from bench_core.trojan.run import (
    RECORDS_FILE,
    TRACES_FILE,
    RunDirError,
    TrojanTrace,
    is_run_dir,
    read_run,
    read_traces,
    write_traces,
)

__all__ = [
    "RECORDS_FILE",
    "TRACES_FILE",
    "RetractedRecord",
    "RunDirError",
    "TrojanTrace",
    "is_run_dir",
    "load_retracted",
    "read_run",
    "read_traces",
    "write_traces",
]
