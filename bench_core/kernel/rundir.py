"""Files every run directory shares: the invocation log ``runs.jsonl`` and lenient JSON Lines reading.

Each benchmark design keeps its own item file and the runner's ``results.jsonl``; the log of
invocations and the way side files are read back are the same for all of them, so they live here.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

RUNS_FILE = "runs.jsonl"


def append_manifest(run_dir: Path, benchmark: str, manifest: dict[str, Any]) -> None:
    """Record one invocation (no secrets: callers pass names of env vars, never their values)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = {"benchmark": benchmark, "started_at": dt.datetime.now(dt.UTC).isoformat(), **manifest}
    with (run_dir / RUNS_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines side file; a missing file is empty and a line cut short by a kill is skipped.

    Side files are appended one flushed line at a time, so only the last line can be incomplete.
    """
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows
