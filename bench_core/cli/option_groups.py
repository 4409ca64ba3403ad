"""Option groups: a run of options that several commands take in the same order, declared once.

typer reads a command's options from its signature. A group is a frozen dataclass whose fields are
options, each field's default being its ``typer.Option`` (flag, default value, help); ``takes``
appends the group's fields to a command's signature, after the command's own options, and calls the
command with their values gathered into one instance of the group. So every command of a group has
the same flags, defaults and help, in the same place of its ``--help`` (docs/command-line.md: add,
never rename).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def takes(group: type, name: str) -> Callable[[F], F]:
    """Give a command the options of ``group`` after its own, and call it with ``name=group(<their values>)``.

    The command declares ``name`` as a keyword-only parameter (typer never sees it). Groups stack: the
    decorator nearest the function adds its options first.
    """
    fields = dataclasses.fields(group)
    hints = typing.get_type_hints(group)
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [inspect.Parameter(f.name, keyword, default=f.default, annotation=hints[f.name]) for f in fields]

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        parameters = [p for p in signature.parameters.values() if p.name != name] + added

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {field.name: kwargs.pop(field.name) for field in fields}
            return command(*args, **kwargs, **{name: group(**values)})

        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
        return wrapper  # type: ignore[return-value]

    return decorate
