"""A self-contained picture of the model DAG: a layered SVG, or an HTML page around it (inline CSS and
script, no network) that fits the window, searches models by name, and on a click lights a model's upstream
and downstream and shows its kind, owner, cron and last interval. Both are rendered from templates/dag.*.j2,
which escape every name, owner and description; the page's script reads its data from a JSON block.

The layout is Sugiyama's: models in columns, a virtual node wherever an edge skips a column (so the edge
runs along a lane between that column's boxes, never behind one), columns ordered by barycentre sweeps to
cut crossings, and vertical positions pulled towards neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from bot.project.dag import topological_order
from bot.report.markdown import render

KIND_COLOURS: Mapping[str, str] = {
    "FULL": "#4e79a7",
    "VIEW": "#59a14f",
    "INCREMENTAL_BY_TIME_RANGE": "#f28e2b",
    "INCREMENTAL_BY_UNIQUE_KEY": "#e15759",
    "SCD_TYPE_2_BY_TIME": "#b07aa1",
    "SCD_TYPE_2_BY_COLUMN": "#9c755f",
    "SEED": "#76b7b2",
    "EXTERNAL": "#bab0ac",
    "EMBEDDED": "#edc948",
}
_FALLBACK = "#888888"
_NODE_W, _NODE_H, _GAP_X, _GAP_Y, _MARGIN = 240, 44, 80, 20, 20
_WORK = 1_000_000   # vertex visits the layout's sweeps may spend
_LANE = 16   # the room an edge takes in a column it skips (boxes keep _GAP_Y / 2 + _LANE / 2 from it)


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
class _Layout:
    columns: list[list[Vertex]]
    y: dict[Vertex, float]              # the centre of each vertex, before the margin is added
    routes: dict[tuple[str, str], list[Vertex]]   # each real edge: parent, its virtual nodes, child


def _layout(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> _Layout:
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
    return _Layout(columns, _place(columns, up, down, sweeps=max(2, min(8, _WORK // max(size, 1)))), routes)


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
    return (_NODE_H + _GAP_Y) / 2 if isinstance(v, str) else _LANE / 2


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


@dataclass(frozen=True)
class Box:
    """One model's box in the picture (top-left corner, SVG units) and what its label says."""

    index: int
    name: str
    kind: str
    colour: str
    x: float
    y: float
    label: str

    @property
    def left(self) -> str:
        return _num(self.x)

    @property
    def top(self) -> str:
        return _num(self.y)

    @property
    def text_x(self) -> str:
        return _num(self.x + 8)

    @property
    def name_y(self) -> str:
        return _num(self.y + 18)

    @property
    def kind_y(self) -> str:
        return _num(self.y + 34)


@dataclass(frozen=True)
class Arrow:
    index: int
    parent: str
    child: str
    d: str


@dataclass(frozen=True)
class Picture:
    """What templates/dag.svg.j2 draws: every box and arrow, and the size of the drawing."""

    width: int
    height: int
    node_w: int
    node_h: int
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]
    fixed: bool = True   # width and height in pixels (a standalone SVG), else it fits its container


def picture(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> Picture:
    """The DAG laid out: one box per model coloured by kind, in columns left to right, and one arrow per
    dependency, parent -> child, routed around the boxes of the columns it skips."""
    kinds = {n.name: n.kind for n in nodes}
    order = {n.name: i for i, n in enumerate(nodes)}
    layout = _layout(nodes, edges)
    vertices = [v for layer in layout.columns for v in layer]
    tops = [layout.y[v] - (_NODE_H / 2 if isinstance(v, str) else _LANE / 2) for v in vertices]
    bottoms = [layout.y[v] + (_NODE_H / 2 if isinstance(v, str) else _LANE / 2) for v in vertices]
    shift = _MARGIN - min(tops, default=0.0)
    y = {v: centre + shift for v, centre in layout.y.items()}
    x = {v: float(_MARGIN + col * (_NODE_W + _GAP_X)) for col, layer in enumerate(layout.columns) for v in layer}
    width = _MARGIN * 2 + max(len(layout.columns), 1) * (_NODE_W + _GAP_X) - _GAP_X
    height = round(max(bottoms, default=_NODE_H) + shift + _MARGIN)
    boxes = tuple(Box(order[v], v, kinds[v], _colour(kinds[v]), x[v], y[v] - _NODE_H / 2, _label(v))
                  for layer in layout.columns for v in layer if isinstance(v, str))
    start, end = _ports(layout.routes, y)
    arrows = []
    for i, ((parent, child), route) in enumerate(sorted(layout.routes.items())):
        points = [(x[parent] + _NODE_W, start[(parent, child)])]
        for virtual in route[1:-1]:
            points += [(x[virtual], y[virtual]), (x[virtual] + _NODE_W, y[virtual])]
        points.append((x[child], end[(parent, child)]))
        arrows.append(Arrow(i, parent, child, _path(points)))
    return Picture(width, height, _NODE_W, _NODE_H, boxes, tuple(arrows))


def dag_svg(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> str:
    """The DAG as a standalone SVG document (templates/dag.svg.j2), its size in pixels."""
    return str(render("dag.svg.j2", picture(nodes, edges)))


def _ports(routes: Mapping[tuple[str, str], list[Vertex]], y: Mapping[Vertex, float]
           ) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """Where each edge leaves its parent's right side and enters its child's left side: a box's edges
    spread a little around its middle, ordered by where they come from or go to, so they do not cross
    at the box."""
    leaving: dict[str, list[tuple[float, tuple[str, str]]]] = {}
    entering: dict[str, list[tuple[float, tuple[str, str]]]] = {}
    for edge, route in routes.items():
        leaving.setdefault(edge[0], []).append((y[route[1]], edge))
        entering.setdefault(edge[1], []).append((y[route[-2]], edge))
    start: dict[tuple[str, str], float] = {}
    end: dict[tuple[str, str], float] = {}
    for ports, side in ((leaving, start), (entering, end)):
        for name, items in ports.items():
            items.sort()
            span = min(_NODE_H - 12, 8 * (len(items) - 1))
            for i, (_, edge) in enumerate(items):
                side[edge] = y[name] - span / 2 + (span * i / (len(items) - 1) if len(items) > 1 else 0)
    return start, end



@dataclass(frozen=True)
class Page:
    """What templates/dag.html.j2 shows: the picture, fitting the window, and the data its script reads."""

    title: str
    models: int
    dependencies: int
    kinds: tuple[tuple[str, str], ...]   # (kind, colour) of the kinds present
    picture: Picture
    data: dict[str, object]              # embedded as JSON: each model's details and the arrows by index


def page(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]], *, title: str = "meshbot DAG") -> Page:
    drawn = picture(nodes, edges)
    index = {n.name: i for i, n in enumerate(nodes)}
    boxes = {box.name: box for box in drawn.boxes}
    models = [{"name": n.name, "kind": n.kind, "owner": n.owner, "cron": n.cron, "description": n.description,
               "last": _interval(n.last_interval), "x": _round(boxes[n.name].x), "y": _round(boxes[n.name].y)}
              for n in nodes]
    arrows = [[index[a.parent], index[a.child]] for a in drawn.arrows]
    present = sorted({n.kind for n in nodes})
    data: dict[str, object] = {"models": models, "edges": arrows, "box": [_NODE_W, _NODE_H],
                               "size": [drawn.width, drawn.height]}
    return Page(title, len(nodes), len(drawn.arrows), tuple((k, _colour(k)) for k in present),
                Picture(drawn.width, drawn.height, _NODE_W, _NODE_H, drawn.boxes, drawn.arrows, fixed=False), data)


def dag_html(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]], *,
             title: str = "meshbot DAG") -> str:
    """One self-contained HTML page (templates/dag.html.j2): the SVG scaled to the window (scrolling when
    it would be too small to read), a search box, and a click on a model to light its upstream and
    downstream and show its details. Inline CSS and script only; nothing is fetched."""
    unique = list({n.name: n for n in nodes}.values())
    return str(render("dag.html.j2", page(unique, edges, title=title)))


def _interval(interval: tuple[int, int] | None) -> str | None:
    """A recorded interval as the page shows it, UTC, its end exclusive.

    >>> _interval((1704067200000, 1704153600000)), _interval((0, 5400000))
    ('2024-01-01 – 2024-01-02 (UTC, end exclusive)', '1970-01-01 00:00 – 1970-01-01 01:30 (UTC, end exclusive)')
    """
    if interval is None:
        return None
    moments = [datetime.fromtimestamp(ms / 1000, tz=timezone.utc) for ms in interval]
    daily = all(m.hour == m.minute == m.second == 0 for m in moments)
    shown = [m.strftime("%Y-%m-%d" if daily else "%Y-%m-%d %H:%M") for m in moments]
    return f"{shown[0]} – {shown[1]} (UTC, end exclusive)"


def _round(value: float) -> float:
    return round(value, 1)


def _colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, _FALLBACK)


def _num(value: float) -> str:
    return f"{round(value, 1):g}"


def _label(name: str) -> str:
    return name if len(name) <= 34 else name[:31] + "..."


def _path(points: list[tuple[float, float]]) -> str:
    """An arrow's path through its points: straight along a lane across a skipped column, an S curve
    (horizontal at both ends, so it stays inside the gap) from one column to the next."""
    (x0, y0), commands = points[0], []
    for i, ((xa, ya), (xb, yb)) in enumerate(zip(points, points[1:])):
        if i % 2:   # across a skipped column, along its lane
            commands.append(f"L {_num(xb)} {_num(yb)}")
        else:
            bend = (xb - xa) / 2
            commands.append(f"C {_num(xa + bend)} {_num(ya)}, {_num(xb - bend)} {_num(yb)}, "
                            f"{_num(xb)} {_num(yb)}")
    return f"M {_num(x0)} {_num(y0)} {' '.join(commands)}"


def write_dag(path: Path, nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]], *,
              title: str = "meshbot DAG") -> Path:
    """Write the picture to `path`: SVG when it ends in `.svg`, else HTML; returns the path."""
    path = Path(path)
    text = dag_svg(nodes, edges) if path.suffix.lower() == ".svg" else dag_html(nodes, edges, title=title)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
