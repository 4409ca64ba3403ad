"""Set-up is honest: the README names every prerequisite and points nowhere outside the repository,
`make demo` installs (and the demo imports) only what the app needs, and later commands find the demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from review_app.config import find_project_file, get_settings, project_settings, write_project_file

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEV_ONLY = ("torch", "transformers", "playwright", "anthropic", "google.genai", "pytest")


def _prose(text: str) -> str:
    """The README without code blocks and code spans (commands and examples there are not links)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def test_the_readme_links_nothing_outside_the_repository():
    targets = re.findall(r"\]\(([^)\s]+)\)", _prose(README))
    assert targets, "the README has links (its screenshot at least)"
    for target in targets:
        assert "://" not in target and not target.startswith("/"), target
        assert (ROOT / target.split("#")[0]).resolve().is_relative_to(ROOT), target
        assert (ROOT / target.split("#")[0]).exists(), target
    assert not re.search(r"\.\./[A-Za-z]", README) and not re.search(r"<https?://", README)


@pytest.mark.parametrize(
    "prerequisite",
    [
        "Python 3.11",
        "PostgreSQL",
        "Chromium",
        "pdflatex",
        "lme4",
        "nginx",
        "MEDREV_TEST_POSTGRES_URL",
        "OPENAI_API_KEY",
    ],
)
def test_the_readme_names_every_prerequisite(prerequisite):
    section = README[README.index("### Prerequisites, command by command") :]
    assert prerequisite in section[: section.index("\n## ")]


def test_make_demo_installs_only_the_apps_dependencies():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo_stamp = re.search(r"^demo: (\S+)$", makefile, re.M).group(1)
    test_stamp = re.search(r"^test: (\S+)$", makefile, re.M).group(1)
    assert demo_stamp != test_stamp
    rule = re.search(rf"^{re.escape(demo_stamp)}: .*?\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "pip install --quiet -e .\n" in rule and "[dev]" not in rule
    rule = re.search(rf"^{re.escape(test_stamp)}: .*?\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert '-e ".[dev]"' in rule


BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {blocked!r}):
            raise ImportError(f"{{name}} is a development extra: the demo must not import it")
sys.meta_path.insert(0, Block())
from review_app.cli import app
sys.argv = ["medrev", *sys.argv[1:]]
app()
"""


def _medrev(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    code = BLOCKER.format(blocked=DEV_ONLY)
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_demo_needs_no_development_extra_and_later_commands_find_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDREV_")}
    env |= {"MEDREV_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    demo = _medrev(["demo", "--no-app"], tmp_path, env)
    assert demo.returncode == 0, demo.stderr
    url = f"sqlite:///{tmp_path / 'medrev-demo.db'}"
    assert f"export MEDREV_DATABASE_URL={url}" in demo.stdout and "medrev.toml names it" in demo.stdout
    assert project_settings(tmp_path / "medrev.toml") == {"database_url": url}
    below = tmp_path / "analysis"
    below.mkdir()
    listed = _medrev(["review", "study", "list"], below, env)
    assert listed.returncode == 0 and "Demo: MedMisBench clinician review" in listed.stdout, listed.stderr
    assert not (tmp_path / "home").exists()  # nothing went to the default database


def test_medrev_toml_is_found_upwards_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDREV_DATABASE_URL", raising=False)
    assert write_project_file("sqlite:////data/a.db", tmp_path) == tmp_path / "medrev.toml"
    assert write_project_file("sqlite:////data/other.db", tmp_path) is None  # never overwritten
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert find_project_file() == tmp_path / "medrev.toml"
    assert get_settings().database_url == "sqlite:////data/a.db"
    monkeypatch.setenv("MEDREV_DATABASE_URL", "sqlite:////data/env.db")
    assert get_settings().database_url == "sqlite:////data/env.db"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('database_url = "unterminated\n', "not a valid TOML file"),
        ('databse_url = "sqlite:///x.db"\n', "unknown setting(s) databse_url"),
        ("database_url = 3\n", "expected a non-empty text value"),
    ],
)
def test_a_broken_medrev_toml_is_refused_naming_the_file(tmp_path, monkeypatch, content, message):
    from typer.testing import CliRunner

    from review_app.cli import app

    monkeypatch.delenv("MEDREV_DATABASE_URL", raising=False)
    (tmp_path / "medrev.toml").write_text(content)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["review", "status"])
    assert result.exit_code == 2 and message in result.output and "medrev.toml" in result.output
    assert "Traceback" not in result.output
