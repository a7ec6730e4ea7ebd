"""The model dependency graph: parents, children, stable topological order, cycles and selectors."""

from __future__ import annotations

import fnmatch
import heapq
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from bot.errors import ConfigError, PlanError
from bot.project.model import Model


@dataclass(frozen=True)
class DAG:
    """Parents restricted to known models; references to anything else are kept in `external`."""

    parents: Mapping[str, tuple[str, ...]]
    children_of: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]
    external: Mapping[str, tuple[str, ...]]   # model → referenced names that are not models

    @classmethod
    def build(cls, models: Mapping[str, Model]) -> "DAG":
        """Build the graph; a cycle is a ConfigError naming every model in it."""
        parents = {name: tuple(sorted(d for d in m.depends_on if d in models and d != name))
                   for name, m in models.items()}
        external = {name: tuple(sorted(d for d in m.depends_on if d not in models))
                    for name, m in models.items()}
        children: dict[str, list[str]] = {name: [] for name in models}
        for name, ups in parents.items():
            for parent in ups:
                children[parent].append(name)
        order = _topological(parents, children)
        if len(order) < len(models):
            cycle = _find_cycle(parents, set(models) - set(order))
            first = models[cycle[0]]
            raise ConfigError("dependency cycle between models: " + " -> ".join([*cycle, cycle[0]]),
                              path=first.path, line=first.line)
        return cls(parents=parents, children_of={k: tuple(sorted(v)) for k, v in children.items()},
                   order=tuple(order), external=external)

    def __contains__(self, name: object) -> bool:
        return name in self.parents

    def children(self, name: str) -> tuple[str, ...]:
        return self.children_of.get(name, ())

    def upstream(self, name: str) -> set[str]:
        """Every transitive parent of `name` (not `name` itself)."""
        return _reach([name], self.parents) - {name}

    def downstream(self, names: Iterable[str]) -> set[str]:
        """Every transitive child of `names`; a given name is included only if another one reaches it."""
        names = list(names)
        reached: set[str] = set()
        for start in names:
            for child in self.children(start):
                if child not in reached:
                    reached |= _reach([child], self.children_of)
        return reached

    def external_sources(self) -> set[str]:
        """Every referenced table that is not a model of the project."""
        return {ref for refs in self.external.values() for ref in refs}


def build_dag(models: Mapping[str, Model]) -> DAG:
    return DAG.build(models)


def _reach(starts: Iterable[str], edges: Mapping[str, tuple[str, ...]]) -> set[str]:
    seen = set(starts)
    stack = list(seen)
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _topological(parents: Mapping[str, tuple[str, ...]], children: Mapping[str, list[str]]) -> list[str]:
    """Kahn's algorithm; among ready models the smallest name goes first, so the order is stable."""
    waiting = {name: len(ups) for name, ups in parents.items()}
    ready = [name for name, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        name = heapq.heappop(ready)
        order.append(name)
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    return order


def _find_cycle(parents: Mapping[str, tuple[str, ...]], remaining: set[str]) -> list[str]:
    """One cycle among models left over by the topological sort, in dependency order."""
    start = min(remaining)
    path: list[str] = []
    index: dict[str, int] = {}
    node = start
    while node not in index:
        index[node] = len(path)
        path.append(node)
        node = min(p for p in parents[node] if p in remaining)
    cycle = path[index[node]:]
    cycle.reverse()   # walked child → parent; report parent → child
    first = cycle.index(min(cycle))
    return cycle[first:] + cycle[:first]


def select_models(selectors: Sequence[str], models: Mapping[str, Model], *,
                  dag: DAG | None = None) -> set[str]:
    """Model names matching any selector: exact name, glob (`db.*`), `tag:x`, `+sel` / `sel+`.

    `+` before a selector adds upstream models, after it downstream ones. A selector matching
    nothing is a PlanError naming it.
    """
    selected: set[str] = set()
    for raw in selectors:
        selector = raw.strip()
        up, down = selector.startswith("+"), selector.endswith("+")
        core = selector.strip("+").strip().lower()
        matched = _match(core, models)
        if not matched:
            raise PlanError(f"selector `{raw}` matches no model")
        if up or down:
            graph = dag or DAG.build(models)
            if up:
                matched |= {p for name in list(matched) for p in graph.upstream(name)}
            if down:
                matched |= graph.downstream(matched)
        selected |= matched
    return selected


def _match(selector: str, models: Mapping[str, Model]) -> set[str]:
    if selector.startswith("tag:"):
        pattern = selector[4:]
        return {name for name, m in models.items()
                if any(fnmatch.fnmatchcase(tag.lower(), pattern) for tag in m.tags)}
    if any(c in selector for c in "*?["):
        return {name for name in models if fnmatch.fnmatchcase(name, selector)}
    if selector in models:
        return {selector}
    if "." not in selector and f"default.{selector}" in models:
        return {f"default.{selector}"}
    return set()
