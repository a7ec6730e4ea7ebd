"""YAML parsed with PyYAML's safe loader, bounded: aliases may repeat only so many nodes, nesting only so deep.

Anchors and aliases stay allowed (`<<: *defaults` is common in real config.yaml files), but an alias
repeats every node of what it names, and each place that walks the parsed value walks them all: nine
levels of nine aliases ("billion laughs", 400 bytes) stand for 10^9 nodes. So the aliases of one
file may stand for at most ALIAS_BUDGET nodes plus ALIAS_NODES_PER_NODE per node the file writes
out. Walking a node costs ~100 times less than parsing one, so a file within the budget costs at
most about twice its parse. An alias inside what it names (a value containing itself) is refused,
and so is nesting deeper than MAX_DEPTH (PyYAML composes recursively: Python's stack would end first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import yaml

ALIAS_BUDGET = 100_000
ALIAS_NODES_PER_NODE = 20
MAX_DEPTH = 100


class YamlProblem(Exception):
    """Why a YAML text cannot be read, and where (1-based line and column when known)."""

    def __init__(self, detail: str, line: int | None = None, col: int | None = None):
        super().__init__(detail)
        self.detail, self.line, self.col = detail, line, col

    @classmethod
    def at(cls, detail: str, mark: Any) -> YamlProblem:
        return cls(detail, mark.line + 1, mark.column + 1) if mark is not None else cls(detail)


@dataclass(frozen=True)
class YamlDocument:
    """A parsed YAML text: its node graph (for lines) and its value; both None for an empty text."""

    node: yaml.Node | None
    data: Any


Edit = Callable[[yaml.Node, yaml.SafeLoader], None]   # changes the composed nodes before they are constructed


def parse_yaml(text: str, *, edit: Edit | None = None) -> YamlDocument:
    """The one document of `text`; a YamlProblem when it is malformed or over the bounds above.

    >>> parse_yaml("base: &b {x: 1}\\nci: {<<: *b, y: 2}").data["ci"]
    {'x': 1, 'y': 2}
    >>> parse_yaml("a: &a [1, 2]\\nb: [*a, *a, *a]\\nc: &c [*c]")
    Traceback (most recent call last):
    bot.project.yaml_parse.YamlProblem: the alias `*c` is inside the value it names (a value containing itself)
    """
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        loader.check_aliases()
        if node is None:
            return YamlDocument(None, None)
        if edit is not None:
            edit(node, loader)
        return YamlDocument(node, loader.construct_document(node))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        problem = getattr(error, "problem", None) or getattr(error, "context", None) or "invalid YAML"
        raise YamlProblem.at(f"malformed YAML: {problem}", mark) from None
    except ValueError:   # a plain scalar YAML types as a date or time that does not exist (2024-13-45)
        raise YamlProblem("malformed YAML: a value looks like a date or time but is not a valid one; "
                          "quote it to keep it text") from None
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader counting, as it composes, the nodes its aliases repeat (a node's size: aliases expanded)."""

    def __init__(self, text: str):
        super().__init__(text)
        self._sizes: dict[int, int] = {}            # id(node) -> nodes it stands for, aliases expanded
        self._aliases: list[tuple[Any, int]] = []   # (mark, nodes repeated so far) at each alias
        self._written = 0
        self._repeated = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:   # its node is still being composed
                raise YamlProblem.at(f"the alias `*{event.anchor}` is inside the value it names "
                                     "(a value containing itself)", event.start_mark)
            self._repeated += size
            self._aliases.append((event.start_mark, self._repeated))
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlProblem.at(f"YAML nested more than {MAX_DEPTH} levels deep", event.start_mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._written += 1
        if isinstance(node, yaml.SequenceNode):
            children = sum(self._sizes[id(item)] for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            children = sum(self._sizes[id(key)] + self._sizes[id(value)] for key, value in node.value)
        else:
            children = 0
        self._sizes[id(node)] = 1 + children
        return node

    def check_aliases(self) -> None:
        """Refuse the text when its aliases repeat more nodes than the budget, naming the alias past it."""
        budget = ALIAS_BUDGET + ALIAS_NODES_PER_NODE * self._written
        if self._repeated <= budget:
            return
        mark = next(mark for mark, repeated in self._aliases if repeated > budget)
        raise YamlProblem.at(
            f"YAML aliases repeat too many nodes: the file writes {self._written:,} and its aliases repeat "
            f"{self._repeated:,}, over meshbot's limit of {ALIAS_BUDGET:,} plus {ALIAS_NODES_PER_NODE} per node "
            f"written ({budget:,}), which keeps an alias bomb from exhausting time and memory; this alias "
            "passes it: write the repeated values out or use fewer aliases", mark)
