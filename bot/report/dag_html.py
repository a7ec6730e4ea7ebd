"""A self-contained picture of the model DAG: layered SVG, optionally wrapped in HTML (no scripts, no network)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Mapping, Sequence

from bot.project.dag import topological_order

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


@dataclass(frozen=True)
class DagNode:
    name: str
    kind: str


def layers(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Nodes grouped by longest distance from a root; each layer sorted by name.

    >>> layers([DagNode("a", "FULL"), DagNode("b", "FULL"), DagNode("c", "VIEW")],
    ...        [("a", "b"), ("b", "c"), ("a", "c")])
    [['a'], ['b'], ['c']]
    """
    names = {n.name for n in nodes}
    parents: dict[str, list[str]] = {name: [] for name in names}
    for parent, child in edges:
        if parent in names and child in names:
            parents[child].append(parent)
    depth: dict[str, int] = {}
    for name in topological_order(parents):
        depth[name] = 1 + max((depth[p] for p in parents[name] if p in depth), default=-1)
    result: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in sorted(names):
        result[depth[name]].append(name)
    return result


def dag_svg(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]]) -> str:
    """The DAG as an SVG document: one box per model coloured by kind, arrows parent → child."""
    kinds = {n.name: n.kind for n in nodes}
    grid = layers(nodes, edges)
    position = {name: (_MARGIN + col * (_NODE_W + _GAP_X), _MARGIN + row * (_NODE_H + _GAP_Y))
                for col, layer in enumerate(grid) for row, name in enumerate(layer)}
    width = _MARGIN * 2 + max(len(grid), 1) * (_NODE_W + _GAP_X) - _GAP_X
    height = _MARGIN * 2 + max((len(layer) for layer in grid), default=1) * (_NODE_H + _GAP_Y) - _GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
             'markerHeight="8" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
             'fill="#555"/></marker></defs>']
    for parent, child in sorted(edges):
        if parent in position and child in position and parent != child:
            parts.append(_edge(position[parent], position[child]))
    for name, (x, y) in sorted(position.items()):
        parts.append(_node(name, kinds[name], x, y))
    parts.append("</svg>")
    return "\n".join(parts)


def dag_html(nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]], *,
             title: str = "meshbot DAG") -> str:
    """An HTML page holding the SVG and a legend of the kinds present; inline styles only."""
    present = sorted({n.kind for n in nodes})
    legend = "".join(
        f'<li><span class="swatch" style="background:{_colour(kind)}"></span>{escape(kind)}</li>'
        for kind in present)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(title)}</title>\n"
        "<style>body{font-family:sans-serif;margin:1.5em}ul.legend{list-style:none;padding:0;"
        "display:flex;flex-wrap:wrap;gap:1em}.swatch{display:inline-block;width:1em;height:1em;"
        "margin-right:.4em;vertical-align:middle;border-radius:2px}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n<p>{len(nodes)} models, {len(edges)} dependencies</p>\n"
        f"<ul class=\"legend\">{legend}</ul>\n{dag_svg(nodes, edges)}\n</body>\n</html>\n")


def _colour(kind: str) -> str:
    return KIND_COLOURS.get(kind, _FALLBACK)


def _node(name: str, kind: str, x: int, y: int) -> str:
    label = name if len(name) <= 34 else name[:31] + "..."
    return (f'<g class="node" data-kind="{escape(kind)}"><title>{escape(name)} ({escape(kind)})</title>'
            f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="6" '
            f'fill="{_colour(kind)}" stroke="#333"/>'
            f'<text x="{x + 8}" y="{y + 18}" fill="#fff" font-weight="bold">{escape(label)}</text>'
            f'<text x="{x + 8}" y="{y + 34}" fill="#fff">{escape(kind)}</text></g>')


def _edge(start: tuple[int, int], end: tuple[int, int]) -> str:
    x1, y1 = start[0] + _NODE_W, start[1] + _NODE_H // 2
    x2, y2 = end[0], end[1] + _NODE_H // 2
    bend = max((x2 - x1) // 2, 20)
    return (f'<path class="edge" d="M {x1} {y1} C {x1 + bend} {y1}, {x2 - bend} {y2}, {x2} {y2}" '
            'fill="none" stroke="#555" marker-end="url(#arrow)"/>')


def write_dag(path: Path, nodes: Sequence[DagNode], edges: Sequence[tuple[str, str]], *,
              title: str = "meshbot DAG") -> Path:
    """Write the picture to `path`: SVG when it ends in `.svg`, else HTML; returns the path."""
    path = Path(path)
    text = dag_svg(nodes, edges) if path.suffix.lower() == ".svg" else dag_html(nodes, edges, title=title)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
