"""Import speed: items and responses files of realistic size, through the import checks.

Prints seconds per import and rows/s for an items file (N items) and a responses file (3 models per
item) on a fresh SQLite database, plus the same work done by the file checks alone (reading every
line, the encoding and cell checks) so their share of the import is visible:

    .venv/bin/python bench/import_speed.py [N]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from review_app.db.engine import make_engine
from review_app.db.migrate import upgrade
from review_app.services import importing
from review_app.services.actors import SYSTEM
from tests.review_app.factories import item_rows, response_rows


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def main(n: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="medrev-import-speed-"))
    items = item_rows(n)
    items_file = _write(folder / "items.jsonl", items)
    responses_file = _write(folder / "responses.jsonl", response_rows(items))
    engine = make_engine(f"sqlite:///{folder / 'speed.db'}")
    upgrade(engine)
    checks = {}
    for name, path in (("items", items_file), ("responses", responses_file)):
        start = time.perf_counter()
        read = importing.read_rows(path)
        checks[name] = (time.perf_counter() - start, len(read.rows))
    start = time.perf_counter()
    done = importing.import_items(engine, items_file, actor=SYSTEM)
    items_s = time.perf_counter() - start
    start = time.perf_counter()
    answers = importing.import_responses(engine, responses_file, actor=SYSTEM)
    responses_s = time.perf_counter() - start
    engine.dispose()
    print(
        f"items:     {done.rows} rows in {items_s:.2f} s ({done.rows / items_s:,.0f} rows/s); "
        f"file checks alone {checks['items'][0]:.2f} s ({checks['items'][0] / items_s:.0%} of the import)"
    )
    print(
        f"responses: {answers.rows} rows in {responses_s:.2f} s ({answers.rows / responses_s:,.0f} rows/s); "
        f"file checks alone {checks['responses'][0]:.2f} s ({checks['responses'][0] / responses_s:.0%} of the import)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
