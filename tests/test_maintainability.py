"""What a maintainer is promised (docs/architecture.md): a README for users, the four maintainers'
documents, no account of how the work went, no reference to a specification outside the repository,
and no module longer than a screen holds unless it is named here with the reason it is one piece."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_LINES = 450
MODULE_LINES = 510  # "about 500": a module a little past 500 lines holds one seam
ONE_PIECE = {
    "review_app/db/models.py": "the schema is read as a whole; Alembic compares the migrations with one metadata",
    "bench_core/kernel/batch_runner.py": "one class whose rounds, polling and cancelling share the runner's state",
}
DIARY = re.compile(
    r"\b(this|previous|earlier|last) stop\b|\bstops? (before|ago)\b|\bissue \d+\b|\bI (ran|measured|saw)\b|"
    r"\bSPEC ?(§|section )?\d",
    re.IGNORECASE,
)


def _tracked(*patterns: str) -> list[Path]:
    """The repository's files matching ``patterns``: git's list, or, in a copy without .git (the Python
    3.13 root gets the committed tree), every matching file outside the virtual environments."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True)
        return [ROOT / line for line in listed.stdout.splitlines() if (ROOT / line).is_file()]
    skip = {".venv", "artefacts", "node_modules", "__pycache__"}
    return [
        path
        for pattern in patterns
        for path in ROOT.glob(pattern if "/" in pattern else f"**/{pattern}")
        if path.is_file() and not skip & set(path.relative_to(ROOT).parts)
    ]


def test_the_readme_fits_and_docs_hold_the_four_documents():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < README_LINES
    for name in ("architecture", "methods", "security", "data-formats"):
        assert (ROOT / "docs" / f"{name}.md").is_file(), name


def test_no_work_diary_and_no_outside_specification():
    texts = _tracked("README.md", "docs/*.md", "*.py", "Makefile", ".ci/*")
    assert texts, "git ls-files found nothing: run from a checkout"
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in texts
        if path.name != "test_maintainability.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DIARY.search(line)
    ]
    assert found == []


def test_the_diary_check_sees_what_it_checks():
    planted = ["The previous stop measured this.", "see SPEC 2.7", "as issue 17 asked", "I ran the bench"]
    assert all(DIARY.search(line) for line in planted)
    assert not DIARY.search("Ctrl-C stops waiting; a tab stop; st.stop()")


def test_long_modules_are_named_with_their_reason():
    long = {
        str(path.relative_to(ROOT))
        for path in _tracked("*.py")
        if len(path.read_text(encoding="utf-8").splitlines()) > MODULE_LINES
    }
    unnamed = sorted(long - set(ONE_PIECE))
    assert unnamed == [], "split these along their seams, or name them in ONE_PIECE with the reason"
    for name in ONE_PIECE:
        assert "one" in (ROOT / name).read_text(encoding="utf-8")[:2500].lower(), f"{name}: say why in its docstring"
