"""Every command's ``--help`` at 80 columns shows every option name whole and cuts nothing.

The command tree is walked from the real ``medrev`` group, so a command added later is checked too.
"""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from review_app.cli import app


def _commands(command, path=()):
    """Every command below ``command``, lazy groups (loaded on first use) included."""
    yield path, command
    if not hasattr(command, "list_commands"):
        return
    ctx = command.make_context(path[-1] if path else "medrev", [], resilient_parsing=True)
    for name in sorted(command.list_commands(ctx)):
        sub = command.get_command(ctx, name)
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, (*path, name))


ROOT_GROUP = typer.main.get_command(app)
COMMANDS = list(_commands(ROOT_GROUP))


def test_lazy_groups_are_listed_with_their_own_help():
    """The root lists review, stats and bench without importing them; the line it shows is theirs."""
    for name, (_module, _attribute, short) in ROOT_GROUP.lazy_commands.items():
        assert ROOT_GROUP.commands[name].help.strip().splitlines()[0] == short, name


def test_the_tree_is_walked():
    names = {" ".join(path) for path, _command in COMMANDS}
    assert {"bench run medmisbench", "bench report", "stats harm-model", "review import", "db upgrade"} <= names
    assert len(names) > 40


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "medrev" for p, _c in COMMANDS])
def test_help_at_80_columns_keeps_every_option_whole(path, command):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text, text  # nothing cut with an ellipsis
    for param in command.params:
        for name in [*param.opts, *param.secondary_opts]:
            if not name.startswith("-"):
                continue
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), f"{name} not whole in:\n{text}"
    for line in text.splitlines():
        if len(line) > 80:  # only a single word longer than the room left may overflow, never be cut
            assert " " not in line.strip().split("  ")[-1], f"line over 80 columns:\n{line}"


def test_the_batch_commands_are_walked():
    """``bench batch status|cancel`` and the ``--batch`` options are held to the same 80-column rule."""
    names = {" ".join(path) for path, _command in COMMANDS}
    assert {"bench batch status", "bench batch cancel"} <= names
    run = dict(COMMANDS)[("bench", "run", "medmisbench")]
    assert {"--batch", "--batch-size", "--batch-fallback", "--poll-interval", "--price-file"} <= {
        name for param in run.params for name in param.opts
    }
