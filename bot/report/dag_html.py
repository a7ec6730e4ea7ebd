"""A self-contained picture of the model DAG: a layered SVG, or an HTML page around it (inline CSS and
script, no network) that fits the window, searches models by name, and on a click lights a model's upstream
and downstream and shows its kind, owner, cron and last interval. Both are rendered from templates/dag.*.j2,
which escape every name, owner and description; the page's script reads its data from a JSON block. Where
each box goes is bot.report.dag_layout's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

from bot.report.dag_layout import (GAP_X, LANE, MARGIN, NODE_H, NODE_W, DagNode, Vertex, layout_of,
                                   layers)
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
    layout = layout_of(nodes, edges)
    vertices = [v for layer in layout.columns for v in layer]
    tops = [layout.y[v] - (NODE_H / 2 if isinstance(v, str) else LANE / 2) for v in vertices]
    bottoms = [layout.y[v] + (NODE_H / 2 if isinstance(v, str) else LANE / 2) for v in vertices]
    shift = MARGIN - min(tops, default=0.0)
    y = {v: centre + shift for v, centre in layout.y.items()}
    x = {v: float(MARGIN + col * (NODE_W + GAP_X)) for col, layer in enumerate(layout.columns) for v in layer}
    width = MARGIN * 2 + max(len(layout.columns), 1) * (NODE_W + GAP_X) - GAP_X
    height = round(max(bottoms, default=NODE_H) + shift + MARGIN)
    boxes = tuple(Box(order[v], v, kinds[v], _colour(kinds[v]), x[v], y[v] - NODE_H / 2, _label(v))
                  for layer in layout.columns for v in layer if isinstance(v, str))
    start, end = _ports(layout.routes, y)
    arrows = []
    for i, ((parent, child), route) in enumerate(sorted(layout.routes.items())):
        points = [(x[parent] + NODE_W, start[(parent, child)])]
        for virtual in route[1:-1]:
            points += [(x[virtual], y[virtual]), (x[virtual] + NODE_W, y[virtual])]
        points.append((x[child], end[(parent, child)]))
        arrows.append(Arrow(i, parent, child, _path(points)))
    return Picture(width, height, NODE_W, NODE_H, boxes, tuple(arrows))


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
            span = min(NODE_H - 12, 8 * (len(items) - 1))
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
    data: dict[str, object] = {"models": models, "edges": arrows, "box": [NODE_W, NODE_H],
                               "size": [drawn.width, drawn.height]}
    return Page(title, len(nodes), len(drawn.arrows), tuple((k, _colour(k)) for k in present),
                Picture(drawn.width, drawn.height, NODE_W, NODE_H, drawn.boxes, drawn.arrows, fixed=False), data)


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
