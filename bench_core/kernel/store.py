"""Append-only, keyed result store (one JSONL file per run directory).

Why this shape: a long evaluation must survive a kill at any moment without losing finished
work or paying for a call twice. Every finished call (success or failure) becomes one JSON line
written with a single ``write`` on an ``O_APPEND`` descriptor under an advisory lock, so a
record is either entirely on disk or absent; a line cut short by a kill is ignored on reading
(and counted), and the next append starts on a fresh line. A rerun reads the keys already
finished and skips them. The store knows nothing about benchmarks: every design (MedMisBench,
HealthContradict, the retracted-paper benchmark, generation, tool use) writes records with the
same six-part key and its own ``meta`` / ``parsed`` fields.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"
OK = "ok"
FAILED = "failed"


@dataclass(frozen=True)
class ResultKey:
    """What makes two calls "the same call": benchmark, item, condition, model, endpoint, config hash."""

    benchmark: str
    item: str
    condition: str
    model: str
    endpoint: str
    config: str

    @property
    def id(self) -> str:
        return "\x1f".join((self.benchmark, self.item, self.condition, self.model, self.endpoint, self.config))

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultKey:
        return cls(**{name: str(data[name]) for name in cls.__dataclass_fields__})


class ResultStore:
    """The results file of one run directory: finished keys in memory, records appended on disk."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.path = path / RESULTS_FILE if path.is_dir() or path.suffix != ".jsonl" else path
        self.corrupt_lines = 0
        self._status: dict[str, str] = {}
        self._fd: int | None = None
        if self.path.exists():
            for record in self.iter_records():
                key = ResultKey.from_dict(record["key"]).id
                if self._status.get(key) != OK:
                    self._status[key] = record["status"]

    def status(self, key: ResultKey) -> str | None:
        """``"ok"``, ``"failed"`` or None (never attempted) for this key."""
        return self._status.get(key.id)

    def __len__(self) -> int:
        return len(self._status)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line, flushed to the OS before returning."""
        key = ResultKey.from_dict(record["key"])
        if record.get("status") not in (OK, FAILED):
            raise ValueError(f"record status must be {OK!r} or {FAILED!r}")
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode()
        fd = self._open()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        if self._status.get(key.id) != OK:
            self._status[key.id] = record["status"]

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            size = os.fstat(self._fd).st_size
            if size:
                with self.path.open("rb") as handle:
                    handle.seek(size - 1)
                    if handle.read(1) != b"\n":
                        os.write(self._fd, b"\n")  # isolate a line cut short by a kill
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Every complete record in file order; incomplete or foreign lines are skipped and counted."""
        self.corrupt_lines = 0
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    self.corrupt_lines += 1
                    continue
                if not isinstance(record, dict) or "key" not in record or "status" not in record:
                    self.corrupt_lines += 1
                    continue
                yield record

    def finished(self, benchmark: str) -> tuple[list[tuple[ResultKey, dict[str, Any]]], list[dict[str, Any]]]:
        """The latest record of every key of ``benchmark``: (successes with their keys, failures).

        What every benchmark's run reader starts from; a key counts as failed only if it never succeeded.
        """
        successes: list[tuple[ResultKey, dict[str, Any]]] = []
        failures: list[dict[str, Any]] = []
        for record in self.latest().values():
            key = ResultKey.from_dict(record["key"])
            if key.benchmark != benchmark:
                continue
            if record["status"] == OK:
                successes.append((key, record))
            else:
                failures.append(record)
        return successes, failures

    def latest(self) -> dict[str, dict[str, Any]]:
        """One record per key: the successful one if any, else the last failure."""
        chosen: dict[str, dict[str, Any]] = {}
        for record in self.iter_records():
            key = ResultKey.from_dict(record["key"]).id
            previous = chosen.get(key)
            if previous is None or previous["status"] != OK:
                chosen[key] = record
        return chosen
