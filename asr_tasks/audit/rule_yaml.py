"""What the rule loader reads of a rule file's YAML beyond its values: the lines of its keys, for messages that
point at the field, and keys written twice (which YAML would drop without a word)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml


class RuleError(ValueError):
    """A rule file that cannot be used; the message names the file and line."""


def no_repeated_keys(path: Path, node: yaml.Node) -> None:
    """YAML keeps the last of a key written twice in one mapping and drops the first without a word."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.value in seen:
                raise RuleError(f"{path}:{key.start_mark.line + 1}: {key.value!r} is written twice in one mapping "
                                f"(the first would be dropped)")
            seen.add(key.value)
            no_repeated_keys(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            no_repeated_keys(path, item)


def key_lines(path: Path, node: yaml.Node) -> list[tuple[str, str]]:
    """Every key under a node, with its file:line, in the file's order."""
    out: list[tuple[str, str]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            out.append((str(key.value), f"{path}:{key.start_mark.line + 1}"))
            out += key_lines(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            out += key_lines(path, item)
    return out


def line_of(message: str, path: Path, node: yaml.Node, default: str) -> str:
    """The line of the field a condition's message names ("fuzzy must be ...", "unknown field(s) fuzy")."""
    named = re.search(r"unknown field\(s\) ([\w-]+)", message) or re.match(r"([\w-]+)", message)
    name = named.group(1) if named else ""
    return next((line for key, line in key_lines(path, node) if key == name), default)
