"""Append-only, keyed result store (one JSONL file per run directory).

Why this shape: a long evaluation must survive a kill at any moment without losing finished
work or paying for a call twice. Every finished call (success or failure) becomes one JSON line
written with a single ``write`` on an ``O_APPEND`` descriptor under an advisory lock, so a
record is either entirely on disk or absent. Only the last line can be cut short (a kill during
that one write): reading ignores it (and counts it), and the next run repairs the file by cutting it
away before appending (its call is made again). A damaged line anywhere else was not written by the
store: reading refuses the file (``DamagedResults``, naming file and line) instead of silently dropping
a result. A rerun reads the keys already finished and skips them. The store knows nothing about
benchmarks: every design (MedMisBench, HealthContradict, the retracted-paper benchmark, generation,
tool use) writes records with the
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


class DamagedResults(ValueError):
    """A results file with a damaged line before its last one: refused whole, naming the file and line."""


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
        self.repaired_bytes = 0
        self._status: dict[str, str] = {}
        self._lines: dict[str, int] = {}
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
            self.repair()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def repair(self) -> int:
        """Cut away a last line left incomplete by a killed process (its call is made again); bytes removed.

        A last line is incomplete when it has no newline or is not a complete record; a damaged line
        before it is not repaired here (``iter_records`` refuses the file).
        """
        if not self.path.exists():
            return 0
        with self.path.open("rb+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                data = handle.read()
                if not data:
                    return 0
                body = data[:-1] if data.endswith(b"\n") else data
                start = body.rfind(b"\n") + 1
                last = data[start:]
                if last.endswith(b"\n") and _complete(last):
                    return 0
                if not last.strip():
                    return 0
                handle.truncate(start)
                self.repaired_bytes = len(last)
                return len(last)
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Every complete record in file order. An incomplete last line (a killed write) is skipped and counted;
        a damaged line before it raises ``DamagedResults`` naming the file and the line."""
        for _line, record in self.iter_numbered():
            yield record

    def iter_numbered(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``iter_records`` with each record's line in the file (1-based), for messages naming the line."""
        self.corrupt_lines = 0
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            lines = handle.read().split(b"\n")
        last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            record = _record(raw)
            if record is None:
                if number - 1 == last:
                    self.corrupt_lines += 1  # cut short by a kill; repaired by the next run
                    continue
                raise DamagedResults(
                    f"{self.path}:{number}: damaged line (not a complete result record); the store never writes "
                    "one before the last line. Delete or repair that line to use this directory "
                    "(a deleted result is called again on the next run)."
                )
            yield number, record

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
        """One record per key: the successful one if any, else the last failure (``line_of`` gives its line)."""
        chosen: dict[str, dict[str, Any]] = {}
        lines: dict[str, int] = {}
        for line, record in self.iter_numbered():
            key = ResultKey.from_dict(record["key"]).id
            previous = chosen.get(key)
            if previous is None or previous["status"] != OK:
                chosen[key] = record
                lines[key] = line
        self._lines = lines
        return chosen

    def line_of(self, key: ResultKey | dict[str, Any]) -> int | None:
        """The line of ``results.jsonl`` holding the record ``latest`` (or ``finished``) chose for ``key``."""
        if isinstance(key, dict):
            key = ResultKey.from_dict(key)
        return self._lines.get(key.id)


def _record(raw: bytes) -> dict[str, Any] | None:
    """The result record on one line, or None when the line is not one (cut short, foreign, not UTF-8)."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("status") not in (OK, FAILED):
        return None
    key = record.get("key")
    if not isinstance(key, dict) or any(key.get(name) is None for name in ResultKey.__dataclass_fields__):
        return None
    return record


def _complete(line: bytes) -> bool:
    return _record(line.strip()) is not None
