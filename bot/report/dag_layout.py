"""Where each model of the DAG picture goes, as Sugiyama lays a graph out: models in columns, a virtual node
wherever an edge skips a column (so the edge runs along a lane between that column's boxes, never behind
one), columns ordered by barycentre sweeps to cut crossings, and vertical positions pulled towards neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from bot.project.dag import topological_order

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN = 240, 44, 80, 20, 20
_WORK = 1_000_000   # vertex visits the layout's sweeps may spend
LANE = 16   # the room an edge takes in a column it skips (boxes keep GAP_Y / 2 + LANE / 2 from it)


@dataclass(frozen=True)
class DagNode:
    """A model as the picture shows it; `last_interval` is its last recorded (start, end) in epoch ms."""

    name: str
    kind: str
    owner: str | None = None
    cron: str | None = None
    description: str | None = None
    last_interval: tuple[int, int] | None = None


def layers(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Nodes grouped into columns, each sorted by name: a model sits at its longest distance from a
    root, and a root just before its nearest child, so that a seed read only by a late model is not
    stretched across the picture. Every edge goes from a column to a later one.

    >>> layers([DagNode("a", "FULL"), DagNode("b", "FULL"), DagNode("c", "VIEW"), DagNode("d", "SEED")],
    ...        [("a", "b"), ("b", "c"), ("a", "c"), ("d", "c")])
    [['a'], ['b', 'd'], ['c']]
    """
    return [sorted(layer) for layer in _columns(_graph(nodes, edges))]


@dataclass(frozen=True)
class _Graph:
    names: set[str]
    edges: list[tuple[str, str]]
    parents: dict[str, list[str]]
    children: dict[str, list[str]]


def _graph(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> _Graph:
    names = {n.name for n in nodes}
    real = sorted({(p, c) for p, c in edges if p in names and c in names and p != c})
    parents: dict[str, list[str]] = {name: [] for name in names}
    children: dict[str, list[str]] = {name: [] for name in names}
    for parent, child in real:
        parents[child].append(parent)
        children[parent].append(child)
    return _Graph(names, real, parents, children)


def _columns(graph: _Graph) -> list[list[str]]:
    depth: dict[str, int] = {}
    for name in topological_order(graph.parents):
        depth[name] = 1 + max((depth[p] for p in graph.parents[name]), default=-1)
    for name in graph.names:   # a root's children are not roots: their columns are final
        if not graph.parents[name] and graph.children[name]:
            depth[name] = min(depth[c] for c in graph.children[name]) - 1
    result: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in sorted(graph.names):
        result[depth[name]].append(name)
    return result


# A vertex of the layered graph: a model's name, or (parent, child, column) for the point where the edge
# parent -> child crosses a column it skips (a "virtual node" in Sugiyama's layout).
Vertex = str | tuple[str, str, int]


@dataclass
class Layout:
    columns: list[list[Vertex]]
    y: dict[Vertex, float]              # the centre of each vertex, before the margin is added
    routes: dict[tuple[str, str], list[Vertex]]   # each real edge: parent, its virtual nodes, child


def layout_of(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> Layout:
    graph = _graph(nodes, edges)
    columns: list[list[Vertex]] = [list(layer) for layer in _columns(graph)]
    column = {name: i for i, layer in enumerate(columns) for name in layer}
    up: dict[Vertex, list[Vertex]] = {v: [] for layer in columns for v in layer}
    down: dict[Vertex, list[Vertex]] = {v: [] for layer in columns for v in layer}
    routes: dict[tuple[str, str], list[Vertex]] = {}
    for parent, child in graph.edges:
        route: list[Vertex] = [parent]
        for col in range(column[parent] + 1, column[child]):
            virtual = (parent, child, col)
            columns[col].append(virtual)
            up[virtual], down[virtual] = [], []
            route.append(virtual)
        route.append(child)
        for a, b in zip(route, route[1:]):
            down[a].append(b)
            up[b].append(a)
        routes[(parent, child)] = route
    for layer in columns:
        layer.sort(key=lambda v: (v, "") if isinstance(v, str) else (v[0], v[1]))
    # Each sweep visits every vertex: a picture with very many (hundreds of columns skipped by thousands of
    # edges) gets fewer sweeps, so that it is drawn in seconds, less tidy, rather than in minutes.
    size = sum(len(layer) for layer in columns) + sum(len(route) for route in routes.values())
    columns = _order(columns, up, down, sweeps=max(2, min(24, _WORK // max(size, 1))))
    return Layout(columns, _place(columns, up, down, sweeps=max(2, min(8, _WORK // max(size, 1)))), routes)


def _order(columns: list[list[Vertex]], up: dict[Vertex, list[Vertex]],
           down: dict[Vertex, list[Vertex]], sweeps: int = 24) -> list[list[Vertex]]:
    """Crossing reduction: sweep left to right and back, sorting each column by the mean position of
    its neighbours in the column just swept; keep the order with the fewest crossings."""
    current = [list(layer) for layer in columns]
    position = {v: i for layer in current for i, v in enumerate(layer)}
    best, fewest = [list(layer) for layer in current], _crossings(current, down, position)
    for sweep in range(sweeps):
        if fewest == 0:
            break
        forward = sweep % 2 == 0
        neighbours = up if forward else down
        indices = range(1, len(current)) if forward else range(len(current) - 2, -1, -1)
        for i in indices:
            layer = current[i]

            def barycentre(v: Vertex) -> tuple[float, int]:
                around = neighbours[v]
                mean = sum(position[u] for u in around) / len(around) if around else position[v]
                return mean, position[v]

            layer.sort(key=barycentre)
            position.update((v, j) for j, v in enumerate(layer))
        crossings = _crossings(current, down, position)
        if crossings < fewest:
            best, fewest = [list(layer) for layer in current], crossings
    return best


def _crossings(columns: list[list[Vertex]], down: dict[Vertex, list[Vertex]],
               position: dict[Vertex, int]) -> int:
    """Edge crossings between neighbouring columns, counted as inversions with a Fenwick tree."""
    total = 0
    for i in range(len(columns) - 1):
        targets = [position[b] for a in columns[i] for b in sorted(down[a], key=position.__getitem__)]
        size = len(columns[i + 1])
        tree = [0] * (size + 1)
        for seen, target in enumerate(targets):
            k, not_greater = target + 1, 0
            while k > 0:
                not_greater += tree[k]
                k -= k & -k
            total += seen - not_greater
            k = target + 1
            while k <= size:
                tree[k] += 1
                k += k & -k
    return total


def _half(v: Vertex) -> float:
    """Half the room a vertex takes in its column: a box and half a gap, or a lane for a passing edge."""
    return (NODE_H + GAP_Y) / 2 if isinstance(v, str) else LANE / 2


def _place(columns: list[list[Vertex]], up: dict[Vertex, list[Vertex]],
           down: dict[Vertex, list[Vertex]], sweeps: int = 8) -> dict[Vertex, float]:
    """Vertical centres: each vertex as near as its column's order allows to the mean of its neighbours
    (weighted isotonic regression), passing edges pulled harder so they run straight."""
    y: dict[Vertex, float] = {}
    for layer in columns:
        offset = 0.0
        for i, v in enumerate(layer):
            offset += _half(layer[i - 1]) + _half(v) if i else 0.0
            y[v] = offset
    for sweep in range(sweeps):
        last = sweep == sweeps - 1
        forward = sweep % 2 == 0
        indices = range(len(columns)) if forward else range(len(columns) - 1, -1, -1)
        for i in indices:
            layer = columns[i]
            wanted = []
            for v in layer:
                around = up[v] + down[v] if last else (up[v] if forward else down[v])
                wanted.append(sum(y[u] for u in around) / len(around) if around else y[v])
            weights = [1.0 if isinstance(v, str) else 4.0 for v in layer]
            gaps = [0.0] + [_half(a) + _half(b) for a, b in zip(layer, layer[1:])]
            y.update(zip(layer, _isotonic(wanted, weights, gaps)))
    return y


def _isotonic(wanted: list[float], weights: list[float], gaps: list[float]) -> list[float]:
    """Positions nearest (least weighted squares) to `wanted` keeping y[i] - y[i-1] >= gaps[i]
    (pool adjacent violators on the positions less their cumulative gaps)."""
    offsets, total = [], 0.0
    for gap in gaps:
        total += gap
        offsets.append(total)
    blocks: list[list[float]] = []   # [weighted sum, weight, count]
    for target, weight, offset in zip(wanted, weights, offsets):
        blocks.append([(target - offset) * weight, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, w, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w
            blocks[-1][2] += n
    result: list[float] = []
    for s, w, n in blocks:
        result.extend([s / w] * int(n))
    return [value + offset for value, offset in zip(result, offsets)]
