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
  a row saved under the same key differs (results of the two would not be comparable);
- ``RunDesign`` and ``find_run_dirs``: how ``bench report`` tells which design a directory belongs to.
  Each design's ``report`` module defines its ``RunDesign``; the list of designs is made by the CLI,
  the one layer that imports several designs (the kernel imports none).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
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
        rows.append(value)
    return rows


def read_json(path: Path) -> Any:
    """A JSON side file (e.g. Trojan's ``records.json``); ``DamagedFile`` naming the file and line if it is not JSON."""
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DamagedFile(f"{path}: not UTF-8 text (byte {exc.start}); medrev writes UTF-8 JSON") from None
    except json.JSONDecodeError as exc:
        raise DamagedFile(f"{path}:{exc.lineno}: damaged JSON ({exc.msg}); repair or restore the file") from None


def rows_of(path: Path, rows: Iterable[dict[str, Any]], read: Callable[[dict[str, Any]], T]) -> list[T]:
    """``read`` applied to each row of a side file; a row without the fields medrev wrote is ``DamagedFile``
    naming the file and the row's position (1-based, blank lines not counted)."""
    out = []
    for index, row in enumerate(rows, start=1):
        try:
            out.append(read(row))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise DamagedFile(f"{path}: record {index} is not one medrev wrote ({_briefly(exc)})") from None
    return out


def _briefly(exc: Exception) -> str:
    """One line for a record's fault: a validation error by its first field and count, a missing key by name."""
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic's ValidationError, without importing pydantic here
        found = errors()
        first = found[0] if found else {}
        where = ".".join(str(part) for part in first.get("loc", ())) or "record"
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        return f"field {where!r}: {first.get('msg', 'invalid')}{more}"
    if isinstance(exc, KeyError):
        return f"field {exc.args[0]!r} missing"
    return f"{type(exc).__name__}: {exc}"


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


class RunDirBusy(ValueError):
    """Another live process runs in this directory: a second run would pay for every call twice."""


class RunLock:
    """The lock of a run directory: a file holding the PID of the process running in it.

    Taken with ``O_EXCL``, so two processes cannot both take it; a lock left by a process that no longer
    exists (killed, machine restarted) is stale and taken over.
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self.held = False

    def acquire(self) -> RunLock:
        """Take the lock (the directory must exist); ``RunDirBusy`` naming the holder's PID if a live process has it."""
        for _attempt in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                holder = self.holder()
                if holder is not None and holder != os.getpid() and pid_alive(holder):
                    raise RunDirBusy(
                        f"{self.path.parent}: another bench run (PID {holder}) is running in this directory; "
                        f"wait for it to finish or stop it (if PID {holder} is not a medrev run, delete {self.path})."
                    ) from None
                self.path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(f"{os.getpid()}\n")
            self.held = True
            return self
        raise RunDirBusy(f"{self.path}: could not take the run directory's lock")

    def holder(self) -> int | None:
        """The PID written in the lock file, or None (no file, or not a PID)."""
        try:
            return int(self.path.read_text(encoding="utf-8").split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def release(self) -> None:
        if self.held:
            if self.holder() == os.getpid():
                self.path.unlink(missing_ok=True)
            self.held = False


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
