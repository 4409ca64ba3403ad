"""Where a value sits in a JSON document: the line of each array element and of each member of an object.

``json.loads`` gives values without positions, so a check of the third record of a JSON array could
only say "records[2]". A user edits the file in an editor and needs the line. These helpers walk a
document that ``json.loads`` has already accepted and return the 1-based line on which each element
or member starts, so a message can name file, line and field.
"""

from __future__ import annotations

import json
import re

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()  # type: ignore[union-attr]  # the pattern matches the empty string


def line_of(text: str, offset: int) -> int:
    """The 1-based line of character ``offset``."""
    return text.count("\n", 0, offset) + 1


def _members(text: str, index: int) -> dict[str, tuple[int, int]]:
    """Offsets (key, value) of the members of the object starting at ``index``."""
    found: dict[str, tuple[int, int]] = {}
    index = _skip(text, index + 1)
    if text[index] == "}":
        return found
    while True:
        index = _skip(text, index)
        key_at = index
        key, index = _DECODER.raw_decode(text, index)
        index = _skip(text, _skip(text, index) + 1)  # past the colon
        value_at = index
        _value, index = _DECODER.raw_decode(text, index)
        found[key] = (key_at, value_at)
        index = _skip(text, index)
        if text[index] != ",":
            return found
        index += 1


def _elements(text: str, index: int) -> list[int]:
    """Offsets of the elements of the array starting at ``index``."""
    found: list[int] = []
    index = _skip(text, index + 1)
    if text[index] == "]":
        return found
    while True:
        index = _skip(text, index)
        found.append(index)
        _value, index = _DECODER.raw_decode(text, index)
        index = _skip(text, index)
        if text[index] != ",":
            return found
        index += 1


def member_lines(text: str) -> dict[str, int]:
    """The line of each member's key of the top-level object of ``text`` (empty if it is not an object)."""
    try:
        start = _skip(text, 0)
        if text[start] != "{":
            return {}
        return {key: line_of(text, at) for key, (at, _value) in _members(text, start).items()}
    except (ValueError, IndexError):  # not the document json.loads accepted: no positions rather than wrong ones
        return {}


def element_lines(text: str, member: str | None = None) -> list[int]:
    """The line of each element of the top-level array of ``text``, or of the array under the top-level
    object's ``member`` (e.g. ``{"records": [...]}``); empty when there is no such array."""
    try:
        start = _skip(text, 0)
        if member is not None:
            if text[start] != "{":
                return []
            where = _members(text, start).get(member)
            if where is None:
                return []
            start = where[1]
        if text[start] != "[":
            return []
        return [line_of(text, at) for at in _elements(text, start)]
    except (ValueError, IndexError):
        return []
