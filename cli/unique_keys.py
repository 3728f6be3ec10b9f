"""Load YAML or JSON refusing a mapping that names one key twice.

``yaml.safe_load`` and ``json.loads`` keep the last value of a repeated key without a word; a
job file with ``workers: 2`` on line 3 and ``workers: 8`` on line 9 would submit 8 workers.
Here a repeat raises :class:`RepeatedKey` with the key's path and both lines.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import yaml

_MERGE_TAG = "tag:yaml.org,2002:merge"
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODE = json.JSONDecoder().raw_decode


class RepeatedKey(Exception):
    def __init__(self, path: tuple[object, ...], line: int, first_line: int) -> None:
        self.key = ".".join(str(part) for part in path)
        self.line = line
        self.first_line = first_line
        super().__init__(f"key {self.key!r} appears twice (also on line {first_line}); keep one")


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing repeated keys (``<<`` merges may be overridden)."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        repeats = _yaml_repeats(loader, root)
        if repeats:
            raise min(repeats, key=lambda repeat: repeat.line)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _yaml_repeats(loader: yaml.SafeLoader, root: yaml.Node) -> list[RepeatedKey]:
    """Every repeat, each mapping's keys compared as the spec sends them (``str``: YAML's
    ``yes`` and ``true`` are one key, and so are ``1`` and ``"1"`` once they are JSON)."""
    repeats: list[RepeatedKey] = []
    stack: list[tuple[tuple[object, ...], yaml.Node]] = [((), root)]
    visited: set[int] = set()
    while stack:
        path, node = stack.pop()
        if id(node) in visited:  # an alias: checked where its anchor is
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(((*path, index), item) for index, item in enumerate(node.value))
        if not isinstance(node, yaml.MappingNode):
            continue
        seen: dict[str, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                stack.append((path, value_node))
                continue
            key = loader.construct_object(key_node, deep=True)
            line = int(key_node.start_mark.line) + 1
            if str(key) in seen:
                repeats.append(RepeatedKey((*path, key), line, seen[str(key)]))
            seen.setdefault(str(key), line)
            stack.append(((*path, key), value_node))
    return repeats


def load_json(text: str) -> Any:
    """``json.loads(text)``, refusing repeated keys."""
    data = json.loads(text)
    repeat = _json_repeat(text)
    if repeat is not None:
        raise repeat
    return data


@dataclasses.dataclass
class _Container:
    path: tuple[object, ...]
    keys: dict[str, int] | None
    """An object's keys so far, with their lines (``None``: an array)."""
    at: str | int = 0
    """The current key of an object, or index of an array."""


def _json_repeat(text: str) -> RepeatedKey | None:
    """The first repeated key of valid JSON ``text``, in reading order."""
    open_containers: list[_Container] = []
    expect_key = False
    index = _skip_space(text, 0)
    while index < len(text):
        char = text[index]
        top = open_containers[-1] if open_containers else None
        if char in "{[":
            path = () if top is None else (*top.path, top.at)
            open_containers.append(_Container(path, {} if char == "{" else None))
            expect_key = char == "{"
            index += 1
        elif char in "]},:":
            if char in "]}":
                open_containers.pop()
            elif char == "," and top is not None and top.keys is None:
                top.at = int(top.at) + 1
            expect_key = char == "," and top is not None and top.keys is not None
            index += 1
        elif char == '"' and expect_key and top is not None and top.keys is not None:
            line = text.count("\n", 0, index) + 1
            key, index = _DECODE(text, index)
            if key in top.keys:
                return RepeatedKey((*top.path, key), line, top.keys[key])
            top.keys[key] = line
            top.at = key
            expect_key = False
        else:
            _value, index = _DECODE(text, index)
        index = _skip_space(text, index)
    return None


def _skip_space(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    return match.end() if match else index
