"""The bench corpus of bad input as a whole, and the faults of the machine rather than of the input.

The case families live beside this module, one per command (``test_bench_medmisbench.py``,
``test_bench_run_dirs.py``, ``test_bench_healthcontradict.py``, ``test_bench_trojan.py``,
``test_bench_generate.py``, ``test_bench_stats.py``); here their names are checked to be unique across the
families (a case is reported by its name alone). A fault of the machine (a folder that cannot be created, a
database that is a folder) exits 1 with one sentence, whatever the command.
"""

from __future__ import annotations

from pathlib import Path

from tests.bad_inputs.bench_support import ROW, folder, jsonl, mmb, old_run
from tests.bad_inputs.corpus import MACHINE, Case, check, parametrize, write
from tests.bad_inputs.test_bench_generate import GENERATE
from tests.bad_inputs.test_bench_healthcontradict import HEALTHCONTRADICT
from tests.bad_inputs.test_bench_medmisbench import ARGUMENTS, MMB_FILES
from tests.bad_inputs.test_bench_run_dirs import RUN_DIRS
from tests.bad_inputs.test_bench_stats import STATS
from tests.bad_inputs.test_bench_trojan import TROJAN

MACHINE_FAULTS: list[Case] = [
    Case(
        "machine-stats-plan-database-is-a-folder",
        lambda w: [
            "--database-url",
            f"sqlite:///{folder(w / 'db')}",
            "stats",
            "plan",
            "--metric",
            "rate",
            "--pilot",
            "p",
        ],
        ("db", "is a folder, not a database file"),
        code=MACHINE,
    ),
    # /sys refuses a new folder to everyone (root included): the machine, not the input, is at fault
    Case(
        "machine-out-not-creatable",
        mmb(lambda w: write(w / "a.jsonl", jsonl([ROW])), out="/sys/medrev-run"),
        ("/sys/medrev-run", "cannot create"),
        code=MACHINE,
    ),
    Case(
        "machine-report-out-not-creatable",
        lambda w: ["bench", "report", str(old_run(w)), "--out", "/sys/medrev-report"],
        ("/sys/medrev-report",),
        code=MACHINE,
    ),
]



CASES = [*MMB_FILES, *ARGUMENTS, *RUN_DIRS, *HEALTHCONTRADICT, *TROJAN, *GENERATE, *STATS]


def test_the_corpus_is_large_and_names_are_unique():
    assert len(CASES) + len(MACHINE_FAULTS) >= 110
    assert len({case.name for case in CASES}) == len(CASES)


@parametrize(MACHINE_FAULTS)
def test_machine_faults_are_one_sentence_and_exit_1(case: Case, tmp_path: Path) -> None:
    outcome = check(case, tmp_path)
    assert len([line for line in outcome.stderr.splitlines() if line.strip()]) == 1, outcome.stderr
