"""The annotations frame (issue 17): the per-row reference against the vectorised read, in one run.

Every Agreement/Analysis/Quality first load starts with the study's annotations frame. This reads
it from a database filled by ``bench/lead_pages_speed.py --build`` twice per round, alternating: with
the reference implementation (the typed rows, long-form scores and per-row ``_frame`` kept in
``tests/review_app/test_annotations_frame_equivalence.py``) and with
:func:`review_app.services.annotations.load_annotations`, checks the two frames are equal cell for
cell, and prints the medians and their ratio. Alternating rounds share whatever load the machine
has, so the ratio holds when absolute seconds do not.

    .venv/bin/python bench/lead_pages_speed.py --build sqlite:////tmp/lead.db --scale 0.25
    .venv/bin/python bench/annotations_frame_speed.py --use sqlite:////tmp/lead.db [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--use", metavar="URL", required=True, help="a database bench/lead_pages_speed.py filled")
    parser.add_argument("--study", default="bench")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import pandas as pd

    from review_app.db.engine import make_engine, read_session
    from review_app.services.annotations import get_study_row, load_annotations
    from tests.review_app.test_annotations_frame_equivalence import reference_fetch, reference_frame

    engine = make_engine(args.use)
    old_s, new_s = [], []
    for _ in range(args.rounds):
        with read_session(engine) as session:
            study = get_study_row(session, args.study)
            start = time.perf_counter()
            old = reference_frame(*reference_fetch(session, study))
            old_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            new = load_annotations(session, study)
            new_s.append(time.perf_counter() - start)
        pd.testing.assert_frame_equal(new, old, check_exact=True)
    figures = {
        "backend": engine.dialect.name,
        "rows": len(new),
        "reference_s": round(statistics.median(old_s), 3),
        "frame_s": round(statistics.median(new_s), 3),
    }
    figures["ratio"] = round(figures["reference_s"] / figures["frame_s"], 2)
    print(
        f"{figures['backend']}: {figures['rows']:,} annotations in force: reference {figures['reference_s']:.2f} s, "
        f"now {figures['frame_s']:.2f} s ({figures['ratio']:.1f}x faster; frames equal cell for cell)"
    )
    print(json.dumps(figures))
    engine.dispose()


if __name__ == "__main__":
    main()
