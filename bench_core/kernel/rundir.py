"""What every run directory shares: the invocation log, side files, the config hash, and the design registry.

Each benchmark design keeps its own item file (MedMisBench ``items.jsonl``, HealthContradict
``instances.jsonl``, Trojan ``records.json``, generation ``source_items.jsonl``) beside the runner's
``results.jsonl``. What is the same for all of them lives here:

- the log of invocations (``runs.jsonl``, one line per command; never a secret) and lenient reading
  of side files appended one flushed line at a time;
- ``config_hash``: the 12-hex-digit SHA-256 of the settings that shape a call, the config part of
  every result key; ``seeded_int``, the stable hash behind seeded draws (Type 1 targets, provenance
  frames, sensitivity subsets), so a draw is the same in every run;
- ``merge_or_refuse``: a rerun into the same directory adds the rows it brings, and refuses the run if
  a row saved under the same key differs (results of the two would not be comparable); ``RunFiles``
  applies it, and the lenient reading, to a design's own item file;
- ``RunLock``: one process at a time in a run directory, by an OS lock that dies with its process;
- ``RunDesign`` and ``find_run_dirs``: how ``bench report`` tells which design a directory belongs to.
  Each design's ``report`` module defines its ``RunDesign``; the list of designs is made by the CLI,
  the one layer that imports several designs (the kernel imports none).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

RUNS_FILE = "runs.jsonl"
T = TypeVar("T")
_MISSING = object()


def config_hash(value: Any) -> str:
    """The config part of result keys: 12 hex digits of the SHA-256 of ``value`` as sorted-key JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


class HashedSettings:
    """Settings of a design's calls: ``as_dict()`` is everything that shapes a request, ``config_hash`` its hash.

    Two calls with the same item, condition, model and endpoint are the same call only when their
    settings hash the same, so a change of any setting starts new result keys instead of mixing in.
    """

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def config_hash(self) -> str:
        return config_hash(self.as_dict())


def seeded_int(*parts: object) -> int:
    """A stable 64-bit integer from ``parts`` (joined with U+001F), for seeded draws and orderings.

    Unlike ``hash()`` it is the same in every process, and unlike a seeded ``random.Random`` walked in
    file order, a draw keyed by (seed, item) does not depend on which other items are loaded.
    """
    return int.from_bytes(hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()[:8], "big")


def append_manifest(run_dir: Path, benchmark: str, manifest: dict[str, Any], *, file: str = RUNS_FILE) -> None:
    """Record one invocation (no secrets: callers pass names of env vars, never their values)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    entry = {"benchmark": benchmark, "started_at": dt.datetime.now(dt.UTC).isoformat(), **manifest}
    with (run_dir / file).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


class DamagedFile(ValueError):
    """A side file of a run directory with a damaged line before its last: refused, naming file and line."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSON Lines side file; a missing file is empty and a last line cut short by a kill is skipped.

    Side files are appended one flushed line at a time, so only the last line can be incomplete; a damaged
    line before it was not written by medrev and is refused (``DamagedFile`` naming the file and line), never
    silently dropped.
    """
    return [row for _line, row in read_jsonl_numbered(path)]


def read_jsonl_numbered(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``read_jsonl`` with each row's line in the file (1-based), for messages naming file, line and field."""
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    rows = []
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            value = None
        if not isinstance(value, dict):
            if index == last:
                continue  # cut short by a kill
            raise DamagedFile(
                f"{path}:{index + 1}: damaged line (not a JSON object); medrev never writes one before the last "
                "line. Repair or delete that line to use this directory."
            )
        rows.append((index + 1, value))
    return rows


def read_json(path: Path) -> Any:
    """A JSON side file (e.g. Trojan's ``records.json``); ``DamagedFile`` naming the file and line if it is not JSON."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DamagedFile(f"{path}: not UTF-8 text (byte {exc.start}); medrev writes UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"{path}:{exc.lineno}: damaged JSON ({exc.msg}); repair or restore the file") from None


def saved_rows(
    run_dir: str | Path, name: str, design: str, error: type[Exception]
) -> tuple[Path, list[tuple[int, dict[str, Any]]]]:
    """The path and numbered rows of side file ``name`` of a ``design`` run directory, for ``rows_of``.

    A directory without the file is not that design's run directory: ``error`` says so, naming the file,
    so a wrong ``--run-dir`` is refused before any row is read.
    """
    path = Path(run_dir) / name
    if not path.is_file():
        raise error(f"{run_dir} is not a {design} run directory (no {name})")
    return path, read_jsonl_numbered(path)


def rows_of(
    path: Path,
    rows: Iterable[dict[str, Any]] | Iterable[tuple[int, dict[str, Any]]],
    read: Callable[[dict[str, Any]], T],
    *,
    field_prefix: str = "",
) -> list[T]:
    """``read`` applied to each row of a side file; a row without the fields medrev wrote is ``DamagedFile``
    naming the file, the line (when ``rows`` are ``read_jsonl_numbered``'s (line, row) pairs), the field at
    fault (``field_prefix`` + its name, e.g. ``item.gold`` when ``read`` validates the row's ``item``) and the
    record's position (1-based, blank lines not counted)."""
    out = []
    for index, entry in enumerate(rows, start=1):
        line, row = entry if isinstance(entry, tuple) else (None, entry)
        try:
            out.append(read(row))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            where = f"{path}:{line}" if line is not None else str(path)
            field, detail = _briefly(exc)
            if field and not isinstance(exc, KeyError):  # a missing key is the row's own, not inside what is read
                field = field_prefix + field
            named = f" field {field!r}:" if field else ""
            raise DamagedFile(f"{where}:{named} record {index} is not one medrev wrote ({detail})") from None
    return out


def _briefly(exc: Exception) -> tuple[str | None, str]:
    """(field, one line) for a record's fault: a validation error by its first field and count, a missing key
    by name, anything else by its type."""
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic's ValidationError, without importing pydantic here
        found = errors()
        first = found[0] if found else {}
        where = ".".join(str(part) for part in first.get("loc", ())) or None
        if where is None:  # a check of the whole record may still name its field (``items.ItemInvalid``)
            where = getattr((first.get("ctx") or {}).get("error"), "field", None)
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return where, f"{str(first.get('msg', 'invalid')).removeprefix('Value error, ')}{more}"
    if isinstance(exc, KeyError):
        return str(exc.args[0]), "missing"
    return None, f"{type(exc).__name__}: {exc}"


def append_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Append rows to a JSON Lines side file, one line each."""
    rows = list(rows)
    if not rows:
        return
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_atomic(path: Path, lines: Iterable[str]) -> None:
    """Replace ``path`` whole (temporary file, fsync, rename), so a reader never sees a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def merge_or_refuse(
    path: Path,
    saved: Mapping[str, Any],
    incoming: Iterable[tuple[str, Any, T]],
    *,
    error: Callable[[str], Exception],
    noun: str,
    context: str,
) -> list[T]:
    """The payloads of ``incoming`` rows whose key is not saved yet, or ``error`` if a saved key differs.

    ``saved`` maps each key already in the file to its comparable form; ``incoming`` gives
    (key, comparable form, payload to write). A key repeated in ``incoming`` counts once. The error
    names the file, the number of differing rows and up to five keys, e.g. ``"<path>: 2 item(s) differ
    from the ones <context>: a, b. Use a new --out directory."``
    """
    known: dict[str, Any] = dict(saved)
    new: list[T] = []
    conflicts: list[str] = []
    for key, comparable, payload in incoming:
        old = known.get(key, _MISSING)
        if old is _MISSING:
            known[key] = comparable
            new.append(payload)
        elif old != comparable:
            conflicts.append(key)
    if conflicts:
        shown = ", ".join(conflicts[:5]) + (" ..." if len(conflicts) > 5 else "")
        raise error(
            f"{path}: {len(conflicts)} {noun}(s) differ from the ones {context}: {shown}. Use a new --out directory."
        )
    return new


@dataclass(frozen=True)
class RunFiles:
    """The files of one design's run directory: its own file of what it evaluates, beside the invocation log.

    ``item_file`` holds the design's items (MedMisBench ``items.jsonl``, HealthContradict
    ``instances.jsonl``, ...); a folder holding it and ``manifest_file`` is that design's run directory.
    ``design`` names the benchmark in messages and ``error`` is the design's ``RunDirError``, so every
    design reads, merges and refuses its files the same way. ``read_items`` and ``add_items`` read an item
    file of JSON Lines (a design whose item file is one JSON document, Trojan's ``records.json``, reads
    and merges it itself).
    """

    benchmark: str
    item_file: str
    design: str
    error: type[Exception]
    manifest_file: str = RUNS_FILE

    def is_run_dir(self, path: Path) -> bool:
        return (path / self.item_file).is_file() and (path / self.manifest_file).is_file()

    def append_manifest(self, run_dir: Path, manifest: dict[str, Any]) -> None:
        """Record one invocation of this benchmark in the run directory's invocation log."""
        append_manifest(run_dir, self.benchmark, manifest, file=self.manifest_file)

    def manifests(self, run_dir: str | Path) -> list[dict[str, Any]]:
        """The invocations recorded in the run directory, oldest first."""
        return read_jsonl(Path(run_dir) / self.manifest_file)

    def read_items(
        self, run_dir: str | Path, read: Callable[[dict[str, Any]], T], *, field_prefix: str = ""
    ) -> list[tuple[int, T]]:
        """Each row of the item file read by ``read``, with its line (``rows_of`` names the line at fault)."""
        path, numbered = saved_rows(run_dir, self.item_file, self.design, self.error)
        values = rows_of(path, numbered, read, field_prefix=field_prefix)
        return [(line, value) for (line, _row), value in zip(numbered, values, strict=True)]

    def add_items(
        self,
        run_dir: Path,
        saved: Callable[[dict[str, Any]], tuple[str, Any]],
        incoming: Iterable[tuple[str, Any, T]],
        *,
        noun: str,
        context: str,
    ) -> tuple[Path, list[T]]:
        """The item file and the payloads of ``incoming`` it lacks (``merge_or_refuse``; ``saved`` gives a saved
        row's key and comparable form); the run directory is created. The caller appends them (``append_jsonl``)
        once its own checks pass."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / self.item_file
        known = dict(saved(row) for row in read_jsonl(path))
        return path, merge_or_refuse(path, known, incoming, error=self.error, noun=noun, context=context)


@dataclass(frozen=True)
class RunDesign:
    """How ``bench report`` recognises one design's run directory, reads it, computes and writes its report."""

    benchmark: str
    is_run_dir: Callable[[Path], bool]
    read_run: Callable[[Path], Any]
    metrics: Callable[[Any], dict[str, Any]]
    write_report: Callable[..., list[Path]]

    def build(self, run_dir: Path) -> dict[str, Any]:
        """The ``bench report --json`` object of ``run_dir``."""
        return self.metrics(self.read_run(run_dir))


def design_of(path: Path, designs: Sequence[RunDesign]) -> RunDesign | None:
    """The design whose run directory ``path`` is, or None."""
    return next((design for design in designs if design.is_run_dir(path)), None)


def find_run_dirs(directory: Path, designs: Sequence[RunDesign]) -> list[tuple[Path, RunDesign]]:
    """``directory`` itself if it is a run directory, else its run-directory children (sorted)."""
    own = design_of(directory, designs)
    if own is not None:
        return [(directory, own)]
    found = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir()):
        design = design_of(child, designs)
        if design is not None:
            found.append((child, design))
    return found


LOCK_FILE = ".medrev-run.lock"
# A holder killed a moment ago may still be exiting (a zombie not yet reaped keeps its PID, but the kernel
# drops its locks as it exits); a lock whose recorded holder is gone or exiting is tried again for this long.
_EXITING_GRACE_SECONDS = 2.0


class RunDirBusy(ValueError):
    """Another live process runs in this directory: a second run would pay for every call twice."""


@dataclass(frozen=True)
class LockHolder:
    """Who holds a run directory's lock, as written inside the lock file (for the message only)."""

    pid: int | None
    host: str | None
    started: str | None

    def describe(self) -> str:
        pid = "unknown" if self.pid is None else str(self.pid)
        host = f" on {self.host}" if self.host else ""
        started = f", started {self.started}" if self.started else ""
        return f"pid {pid}{host}{started}"


class RunLock:
    """The lock of a run directory: an exclusive ``flock`` on ``.medrev-run.lock``, held while a run works in it.

    The operating system drops a ``flock`` when its process dies, however it dies (``kill -9`` included, before
    the dead process is even reaped), so a killed run never blocks its own resume, and there is no stale lock
    to guess about. The holder's PID, host and start time are written inside the file only so that a refused
    run can say who holds the folder. The file is removed on release; a process that opened it just before
    the removal notices that the path no longer names the file it locked, and tries again.
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self.held = False
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock (the directory must exist); ``RunDirBusy`` naming the holder if another process has it."""
        import fcntl

        deadline = time.monotonic() + _EXITING_GRACE_SECONDS
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                holder = self.holder()
                here = holder.host in (None, socket.gethostname())
                if here and holder.pid is not None and _exiting(holder.pid) and time.monotonic() < deadline:
                    time.sleep(0.01)  # its locks go as it finishes dying
                    continue
                raise RunDirBusy(
                    f"{self.path.parent}: another run ({holder.describe()}) holds this folder; wait for it to "
                    "finish or stop it, then run the same command again to resume."
                ) from None
            except BaseException:
                os.close(fd)
                raise
            if not self._same_file(fd):
                os.close(fd)  # released and removed between our open and our lock: take the new file
                continue
            self._fd = fd
            self._write_holder(fd)
            self.held = True
            return self

    def _same_file(self, fd: int) -> bool:
        try:
            named = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)

    @staticmethod
    def _write_holder(fd: int) -> None:
        started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()} {started}\n".encode(), 0)

    def holder(self) -> LockHolder:
        """The holder written in the lock file (PID, host, start time); fields it lacks are None."""
        try:
            parts = self.path.read_text(encoding="utf-8").split()
        except (OSError, UnicodeDecodeError):
            parts = []
        pid = int(parts[0]) if parts and parts[0].isdigit() else None
        return LockHolder(pid, parts[1] if len(parts) > 1 else None, parts[2] if len(parts) > 2 else None)

    def release(self) -> None:
        if self.held and self._fd is not None:
            if self._same_file(self._fd):
                self.path.unlink(missing_ok=True)  # still locked: nobody can take the file being removed
            os.close(self._fd)  # closing drops the lock
            self._fd = None
        self.held = False


def _exiting(pid: int) -> bool:
    """True when ``pid`` is gone or a zombie (killed, not yet reaped): a lock it held is being released."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return not pid_alive(pid)
    return state in (b"Z", b"X")


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def benchmarks_in(directory: Path) -> set[str]:
    """The benchmarks whose runs the invocation log of ``directory`` records (empty for a new directory)."""
    return {str(row["benchmark"]) for row in read_jsonl(Path(directory) / RUNS_FILE) if row.get("benchmark")}
