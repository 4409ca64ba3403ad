"""Retracted-paper contamination ("Trojan paper"): does a model rely on retracted medical findings.

The public face of the design (what the review app's judge audit uses). Inside: ``data`` (records and
their provenance), ``prompts`` (the seed's prompts, verbatim), ``judging`` (reading the judge),
``run`` (the two stages), ``run_files`` (the run directory's files), ``traces`` (a run read back, one
trace per record and target model), ``metrics`` and ``report``.
"""

from bench_core.trojan.data import RetractedRecord, load_retracted
from bench_core.trojan.run_files import RECORDS_FILE, TRACES_FILE, RunDirError, is_run_dir
from bench_core.trojan.traces import TrojanTrace, read_run, read_traces, write_traces

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
