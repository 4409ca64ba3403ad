"""Row-level load problems and the error that refuses a file."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowIssue:
    """One row that could not be loaded: where it is and what is wrong with it."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f" field {self.field!r}:" if self.field else ""
        return f"{where}:{what} {self.message}"


class DatasetError(ValueError):
    """A file (or folder) refused whole; ``issues`` lists every problem found, not just the first."""

    def __init__(self, issues: list[RowIssue], *, limit: int = 20) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  - {issue}" for issue in self.issues[:limit])
        more = len(self.issues) - limit
        tail = f"\n  ... and {more} more" if more > 0 else ""
        noun = "problem" if len(self.issues) == 1 else "problems"
        super().__init__(f"{len(self.issues)} {noun} found, nothing was loaded:\n{shown}{tail}")
