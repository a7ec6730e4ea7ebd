"""The dependency graph: stable topological order, cycles, upstream/downstream, selectors, and speed at scale."""

from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path

import pytest
from dag_screenshot import colour_counts, png_pixels, run_in_page, screenshot

from bot.errors import ConfigError, CycleError, PlanError
from bot.project.dag import (DAG, children_of, reachable, select_models, topological_order,
                             upstream_of)
from bot.project.model import Kind, Model
from bot.report.dag_html import KIND_COLOURS, DagNode, dag_svg, layers, write_dag
from bot.report.dag_layout import NODE_H as _NODE_H, NODE_W as _NODE_W


def model(name: str, *parents: str, tags: tuple[str, ...] = ()) -> Model:
    return Model(name=name, kind=Kind(), dialect="spark", path=Path(f"models/{name}.sql"),
                 depends_on=frozenset(parents), tags=tags, line=1)


def models_of(*items: Model) -> dict[str, Model]:
    return {m.name: m for m in items}


@pytest.fixture
def shop() -> dict[str, Model]:
    return models_of(
        model("shop.top", "shop.revenue", tags=("finance",)),
        model("shop.revenue", "shop.orders", "shop.customers", tags=("finance", "daily")),
        model("shop.orders", "raw.orders_export"),
        model("shop.customers"),
        model("mart.kpis", "shop.revenue"),
    )


def test_order_is_topological_and_stable(shop):
    dag = DAG.build(shop)
    assert dag.order == ("shop.customers", "shop.orders", "shop.revenue", "mart.kpis", "shop.top")
    assert DAG.build(dict(reversed(list(shop.items())))).order == dag.order


def test_parents_children_and_external_sources(shop):
    dag = DAG.build(shop)
    assert dag.parents["shop.revenue"] == ("shop.customers", "shop.orders")
    assert dag.parents["shop.orders"] == ()
    assert dag.external["shop.orders"] == ("raw.orders_export",)
    assert dag.external_sources() == {"raw.orders_export"}
    assert dag.children("shop.revenue") == ("mart.kpis", "shop.top")


def test_upstream_and_downstream_are_transitive(shop):
    dag = DAG.build(shop)
    assert dag.upstream("shop.top") == {"shop.revenue", "shop.orders", "shop.customers"}
    assert dag.downstream(["shop.orders"]) == {"shop.revenue", "shop.top", "mart.kpis"}
    assert dag.downstream(["shop.orders", "shop.revenue"]) == {"shop.revenue", "shop.top", "mart.kpis"}
    assert dag.downstream(["shop.top"]) == set()


def test_cycle_names_every_model_and_a_file():
    models = models_of(model("db.a", "db.c"), model("db.b", "db.a"), model("db.c", "db.b"),
                       model("db.d", "db.c"), model("db.e"))
    with pytest.raises(ConfigError) as info:
        DAG.build(models)
    message = str(info.value)
    assert "db.a -> db.b -> db.c -> db.a" in message
    assert "models/db.a.sql" in message and "db.d ->" not in message and "db.e" not in message


def test_order_is_parents_first_then_by_name_whatever_the_input_order():
    parents = {"db.z": [], "db.y": ["db.z"], "db.b": ["raw.src"], "db.a": ["db.y", "db.b"], "db.c": []}
    expected = ["db.b", "db.c", "db.z", "db.y", "db.a"]
    assert topological_order(parents) == expected
    assert topological_order(dict(reversed(list(parents.items())))) == expected
    assert topological_order({}) == []


def test_cycle_error_lists_the_loop_from_its_smallest_name_and_skips_bystanders():
    parents = {"m.q": ["m.p"], "m.p": ["m.r"], "m.r": ["m.q"], "m.tail": ["m.r"], "m.root": []}
    with pytest.raises(CycleError) as info:
        topological_order(parents)
    assert info.value.cycle == ("m.p", "m.q", "m.r")
    assert str(info.value) == "models depend on each other in a cycle: m.p -> m.q -> m.r -> m.p"
    assert isinstance(info.value, PlanError)


def test_descendants_and_ancestors_walk_every_path_once():
    parents = {"a": [], "b": ["a"], "c": ["a", "b"], "d": ["c"], "e": []}
    children = children_of(parents)
    assert children == {"a": ("b", "c"), "b": ("c",), "c": ("d",), "d": (), "e": ()}
    assert reachable(children, ["b"]) == {"b", "c", "d"}
    assert reachable(parents, ["d"]) == {"a", "b", "c", "d"}
    assert reachable(children, []) == set()


def test_upstream_of_skips_unlisted_models_to_the_nearest_listed_ancestors():
    parents = {"db.v": ["db.a"], "db.c": ["db.v"], "db.d": ["db.c", "db.a"], "db.a": [], "db.b": []}
    upstream = upstream_of(["db.a", "db.b", "db.c", "db.d"], parents.__getitem__)
    assert upstream == {"db.a": set(), "db.b": set(), "db.c": {"db.a"}, "db.d": {"db.a", "db.c"}}


def test_upstream_of_walks_long_chains_of_unlisted_models():
    """A run where only the two ends of a 5,000-view chain are due (a recursive walk overflowed here)."""
    parents = {f"db.v{i}": [f"db.v{i - 1}"] for i in range(1, 5000)} | {"db.v0": []}
    assert upstream_of(["db.v0", "db.v4999"], parents.__getitem__) == {"db.v0": set(), "db.v4999": {"db.v0"}}


def test_self_reference_is_not_a_parent():
    dag = DAG.build(models_of(model("db.a", "db.a")))
    assert dag.parents["db.a"] == () and dag.order == ("db.a",)


def test_selectors(shop):
    assert select_models(["shop.orders"], shop) == {"shop.orders"}
    assert select_models(["SHOP.Orders"], shop) == {"shop.orders"}
    assert select_models(["shop.*"], shop) == {"shop.top", "shop.revenue", "shop.orders", "shop.customers"}
    assert select_models(["tag:finance"], shop) == {"shop.top", "shop.revenue"}
    assert select_models(["tag:daily", "mart.*"], shop) == {"shop.revenue", "mart.kpis"}
    assert select_models(["shop.orders+"], shop) == {"shop.orders", "shop.revenue", "shop.top", "mart.kpis"}
    assert select_models(["+shop.revenue"], shop) == {"shop.revenue", "shop.orders", "shop.customers"}


def test_selector_without_schema_uses_default():
    models = models_of(model("default.orders"))
    assert select_models(["orders"], models) == {"default.orders"}


def test_unmatched_selector_is_a_plan_error(shop):
    with pytest.raises(PlanError, match="`tag:nope`"):
        select_models(["shop.orders", "tag:nope"], shop)
    with pytest.raises(PlanError, match="`missing.model`"):
        select_models(["missing.model"], shop)


def test_large_graph_orders_walks_and_selects():
    count = 5000
    models = {}
    for i in range(count):
        parents = [f"db.m{j}" for j in (i - 1, i // 2, i - 7) if 0 <= j < i]
        models[f"db.m{i}"] = model(f"db.m{i}", *parents, tags=(f"t{i % 10}",))
    dag = DAG.build(models)
    down = dag.downstream(["db.m0"])
    selected = select_models(["tag:t3", "db.m1*"], models, dag=dag)
    assert len(dag.order) == count and dag.order[0] == "db.m0"
    position = {name: i for i, name in enumerate(dag.order)}
    assert all(position[p] < position[c] for c, parents in dag.parents.items() for p in parents)
    assert len(down) == count - 1 and len(selected) > 500


# -- the picture (bot/report/dag_html.py): geometry read back from the SVG it writes --------------------

_RECT = re.compile(r'<g class="node" data-kind="[^"]*" data-index="\d+"><title>([^<]*) \([^<]*\)</title>'
                   r'<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)"')
_EDGE = re.compile(r'<path class="edge" data-index="\d+" data-parent="([^"]*)" data-child="([^"]*)" d="([^"]*)"')


def page_data(page: str) -> dict:
    """The JSON block the page's script reads (JSON.parse of the script element's text, as the page does)."""
    found = re.findall(r'<script type="application/json" id="dag-data">(.*?)</script>', page, re.S)
    assert len(found) == 1
    return json.loads(found[0])


def boxes_of(svg: str) -> dict[str, tuple[float, float, float, float]]:
    """Each model's box as (left, top, right, bottom)."""
    found = {}
    for name, x, y, w, h in _RECT.findall(svg):
        found[html.unescape(name)] = (float(x), float(y), float(x) + float(w), float(y) + float(h))
    return found


def edges_of(svg: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each drawn edge as the polyline it follows: straight segments as they are, cubic curves sampled."""
    drawn = {}
    for parent, child, d in _EDGE.findall(svg):
        tokens = d.replace(",", " ").split()
        assert tokens[0] == "M", d
        points = [(float(tokens[1]), float(tokens[2]))]
        i = 3
        while i < len(tokens):
            if tokens[i] == "L":
                points.append((float(tokens[i + 1]), float(tokens[i + 2])))
                i += 3
            elif tokens[i] == "C":
                (x0, y0), (x1, y1, x2, y2, x3, y3) = points[-1], map(float, tokens[i + 1:i + 7])
                for k in range(1, 33):
                    t = k / 32
                    a, b, c, e = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3
                    points.append((a * x0 + b * x1 + c * x2 + e * x3, a * y0 + b * y1 + c * y2 + e * y3))
                i += 7
            else:
                raise AssertionError(f"unexpected path command {tokens[i]!r} in {d}")
        key = (html.unescape(parent), html.unescape(child))
        assert key not in drawn, f"{key} drawn twice"
        drawn[key] = points
    return drawn


def segment_hits_box(a: tuple[float, float], b: tuple[float, float],
                     box: tuple[float, float, float, float]) -> bool:
    """Whether the segment a-b meets the rectangle (Liang-Barsky clipping)."""
    left, top, right, bottom = box
    (x0, y0), (dx, dy) = a, (b[0] - a[0], b[1] - a[1])
    low, high = 0.0, 1.0
    for p, q in ((-dx, x0 - left), (dx, right - x0), (-dy, y0 - top), (dy, bottom - y0)):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                low = max(low, t)
            else:
                high = min(high, t)
            if low > high:
                return False
    return True


def assert_reads_right(svg: str, nodes, edges) -> None:
    """Every box drawn once and apart from the others; columns left to right; one path per real edge,
    from its parent's right side to its child's left side, rightwards, through no other box."""
    boxes = boxes_of(svg)
    assert set(boxes) == {n.name for n in nodes}
    width = float(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))
    height = float(re.search(r'<svg [^>]*height="(\d+)"', svg).group(1))
    for name, (left, top, right, bottom) in boxes.items():
        assert 0 <= left < right <= width and 0 <= top < bottom <= height, name
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (l1, t1, r1, b1), (l2, t2, r2, b2) = boxes[a], boxes[b]
            assert r1 <= l2 or r2 <= l1 or b1 <= t2 or b2 <= t1, f"{a} overlaps {b}"
    columns = sorted({box[0] for box in boxes.values()})
    assert all(later - earlier >= boxes[names[0]][2] - boxes[names[0]][0]
               for earlier, later in zip(columns, columns[1:]))
    drawn = edges_of(svg)
    real = {(p, c) for p, c in edges if p != c and p in boxes and c in boxes}
    assert set(drawn) == real
    assert svg.count('class="edge"') == len(real)
    for (parent, child), points in drawn.items():
        (pl, pt, pr, pb), (cl, ct, cr, cb) = boxes[parent], boxes[child]
        assert pr < cl, f"{parent} is not left of {child}"
        (x0, y0), (x1, y1) = points[0], points[-1]
        assert x0 == pr and pt < y0 < pb, f"{parent} -> {child} does not leave {parent}'s right side"
        assert x1 == cl and ct < y1 < cb, f"{parent} -> {child} does not enter {child}'s left side"
        assert all(b[0] >= a[0] - 1e-6 for a, b in zip(points, points[1:])), f"{parent} -> {child} turns back"
        xs, ys = [x for x, _ in points], [y for _, y in points]
        x_low, x_high, y_low, y_high = min(xs), max(xs), min(ys), max(ys)
        for name, (left, top, right, bottom) in boxes.items():
            # another model's box, with a margin, is never touched; the edge's own boxes only at their side
            box = ((left - 2, top - 2, right + 2, bottom + 2) if name not in (parent, child)
                   else (left + 1, top + 1, right - 1, bottom - 1))
            if box[2] < x_low or box[0] > x_high or box[3] < y_low or box[1] > y_high:
                continue   # wholly beside the path's bounding box: no segment of it can meet the box
            hit = next((a for a, b in zip(points, points[1:]) if segment_hits_box(a, b, box)), None)
            assert hit is None, f"{parent} -> {child} passes through {name}'s box near {hit}"


def skipping_shop() -> tuple[list[DagNode], list[tuple[str, str]]]:
    """The issue's picture: customers -> customer_revenue skipping the column of orders-derived models,
    plus longer skips from seeds and to a final report."""
    kinds = {"shop.raw_customers": "SEED", "shop.raw_orders": "SEED", "shop.customers": "INCREMENTAL_BY_UNIQUE_KEY",
             "shop.orders": "INCREMENTAL_BY_TIME_RANGE", "shop.order_lines": "VIEW",
             "shop.customer_revenue": "FULL", "shop.top_customers": "VIEW", "shop.report": "VIEW"}
    edges = [("shop.raw_customers", "shop.customers"), ("shop.raw_orders", "shop.orders"),
             ("shop.orders", "shop.order_lines"), ("shop.order_lines", "shop.customer_revenue"),
             ("shop.customers", "shop.customer_revenue"), ("shop.customer_revenue", "shop.top_customers"),
             ("shop.customers", "shop.report"), ("shop.raw_orders", "shop.report"),
             ("shop.top_customers", "shop.report"), ("shop.raw_customers", "shop.customer_revenue")]
    return [DagNode(name, kind) for name, kind in sorted(kinds.items())], edges


def test_an_edge_skipping_a_column_goes_around_the_boxes_in_it():
    nodes, edges = skipping_shop()
    svg = dag_svg(nodes, edges)
    assert_reads_right(svg, nodes, edges)
    boxes, drawn = boxes_of(svg), edges_of(svg)
    # the issue: customers -> customer_revenue used to run straight behind the box in the column between
    skip = drawn[("shop.customers", "shop.customer_revenue")]
    between = boxes["shop.order_lines"]
    assert any(between[0] <= x <= between[2] for x, _ in skip)
    assert not any(between[0] <= x <= between[2] and between[1] - 2 <= y <= between[3] + 2 for x, y in skip)
    assert svg.count('class="edge"') == len(edges)


def test_the_example_project_reads_right(tmp_path):
    from bot.context import Context
    from bot.project.example import write_example

    write_example(tmp_path / "shop")
    names, edges = Context(tmp_path / "shop").dag()
    nodes = [DagNode(name, kind) for name, kind in names]
    assert_reads_right(dag_svg(nodes, edges), nodes, edges)


def test_columns_are_ordered_to_avoid_crossings():
    """By name, a->z, b->y, c->x would cross three times; the barycentre sweeps untangle them."""
    nodes = [DagNode(n, "FULL") for n in ("m.a", "m.b", "m.c", "m.x", "m.y", "m.z")]
    edges = [("m.a", "m.z"), ("m.b", "m.y"), ("m.c", "m.x")]
    boxes = boxes_of(dag_svg(nodes, edges))
    parents = sorted(("m.a", "m.b", "m.c"), key=lambda n: boxes[n][1])
    children = sorted(("m.x", "m.y", "m.z"), key=lambda n: boxes[n][1])
    assert [dict(edges)[p] for p in parents] == children


def test_a_root_sits_just_before_its_nearest_child():
    nodes = [DagNode(n, "FULL") for n in ("m.a", "m.b", "m.c", "m.d")] + [DagNode("m.seed", "SEED")]
    edges = [("m.a", "m.b"), ("m.b", "m.c"), ("m.c", "m.d"), ("m.seed", "m.d")]
    assert layers(nodes, edges) == [["m.a"], ["m.b"], ["m.c", "m.seed"], ["m.d"]]
    boxes = boxes_of(dag_svg(nodes, edges))
    assert boxes["m.seed"][0] == boxes["m.c"][0]


@pytest.mark.parametrize("seed", range(6))
def test_random_dags_read_right(seed):
    rng = random.Random(seed)
    count = 40
    nodes = [DagNode(f"db.m{i:02d}", rng.choice(["FULL", "VIEW", "SEED", "EXTERNAL"])) for i in range(count)]
    edges = [(f"db.m{j:02d}", f"db.m{i:02d}") for i in range(count) for j in range(i)
             if rng.random() < 3 / (i + 1)]
    loop = f"db.m{rng.randrange(count):02d}"
    edges += [(loop, loop), ("raw.elsewhere", "db.m00")]   # neither is drawn
    assert_reads_right(dag_svg(nodes, edges), nodes, edges)


def test_a_large_dag_draws_every_box_and_edge():
    """600 models in 12 columns, each reading up to four earlier models, many of them columns back (its speed
    is measured in benchmarks/, not here)."""
    rng = random.Random(7)
    nodes = [DagNode(f"db.m{i}", "FULL") for i in range(600)]
    edges = [(f"db.m{rng.randrange(i // 50 * 50)}", f"db.m{i}")
             for i in range(50, 600) for _ in range(rng.randint(1, 4))]
    svg = dag_svg(nodes, edges)
    assert svg.count('class="edge"') == len(set(edges))
    assert len(boxes_of(svg)) == 600


def test_the_html_stays_self_contained(tmp_path):
    nodes, edges = skipping_shop()
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="shop <&>").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>shop &lt;&amp;&gt;</title>" in page
    assert "https://" not in page and "http://www.w3.org/2000/svg" in page
    assert "<link" not in page and "url(" not in page.replace("url(#arrow)", "") and "@import" not in page
    # two inline scripts, none fetched: the data block (JSON) and the page's own script
    assert re.findall(r"<script[^>]*>", page) == ['<script type="application/json" id="dag-data">', "<script>"]
    assert "fetch(" not in page and "XMLHttpRequest" not in page and "import(" not in page
    assert page.count('class="edge"') == len(edges)
    data = page_data(page)
    assert [m["name"] for m in data["models"]] == [n.name for n in nodes]
    assert len(data["edges"]) == len(edges)


def long_runs(rows: list[bytes], colour: tuple[int, int, int], length: int) -> list[tuple[int, int]]:
    """(x, y) where a run of at least `length` pixels of exactly `colour` starts."""
    pixel, found = bytes(colour), []
    for y, row in enumerate(rows):
        x = 0
        while (start := row.find(pixel * length, 3 * x)) >= 0:
            if start % 3:
                x = start // 3 + 1
                continue
            found.append((start // 3, y))
            x = start // 3 + 1
            while row[3 * x:3 * x + 3] == pixel:
                x += 1
    return found


def test_a_headless_chromium_screenshot_shows_the_picture(tmp_path):
    """Rendered by a browser, every box shows whole in its colour and no line is drawn across one
    (edges are drawn over the boxes, so one that crossed a box would show here).

    Chromium must be installed (CI: apt-get install -y chromium); without it this fails, it never skips."""
    nodes, edges = skipping_shop()
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="shop")
    svg = dag_svg(nodes, edges)
    png = screenshot(page, tmp_path / "dag.png", width=2100, height=700)
    width, height, rows = png_pixels(png.read_bytes())
    assert (width, height) == (2100, 700)
    counts = colour_counts(rows)
    background = max(counts, key=counts.__getitem__)
    assert background == (255, 255, 255) and counts[background] < width * height * 0.95

    boxes, kinds = boxes_of(svg), {n.name: n.kind for n in nodes}
    fills = {kind: tuple(int(KIND_COLOURS[kind][i:i + 2], 16) for i in (1, 3, 5)) for kind in kinds.values()}
    offsets = set()
    for kind, fill in fills.items():
        drawn = sum(1 for name in boxes if kinds[name] == kind)
        # most of each box is its fill: every box is drawn, none painted over
        assert counts.get(fill, 0) > drawn * _NODE_W * _NODE_H * 0.6, (kind, counts.get(fill, 0))
        xs, ys = zip(*long_runs(rows, fill, 100))   # the boxes' rows, not the legend's swatches
        left = min(box[0] for name, box in boxes.items() if kinds[name] == kind)
        top = min(box[1] for name, box in boxes.items() if kinds[name] == kind)
        offsets.add((round(min(xs) - left), round(min(ys) - top)))
    # where the SVG sits on the page, found from each kind's boxes alike (to a pixel)
    assert max(x for x, _ in offsets) - min(x for x, _ in offsets) <= 1, offsets
    assert max(y for _, y in offsets) - min(y for _, y in offsets) <= 1, offsets
    dx, dy = min(offsets)[0] - 1, min(offsets)[1] - 1   # the first full row and column are inside the stroke
    for name, (left, top, right, bottom) in boxes.items():
        fill = fills[kinds[name]]
        assert 0 <= left + dx and right + dx < width and 0 <= top + dy and bottom + dy < height, name
        inside = [(x, y) for y in range(round(top + dy) + 4, round(bottom + dy) - 3)
                  for x in range(round(left + dx) + 4, round(right + dx) - 3)
                  if sum(rows[y][3 * x:3 * x + 3]) < sum(fill) - 60]   # darker than the fill: a line
        assert inside == [], f"a line is drawn across {name} at {inside[:3]}"
    lines = sum(n for (r, g, b), n in colour_counts(rows[round(dy):]).items() if r == g == b and 60 <= r <= 200)
    assert lines > 500, lines   # the edges show


# -- the page in a browser: fits the window, scrolls at 300 models, search, click, hostile names -----------

# Runs in the page after its own script (tests/dag_screenshot.run_in_page); leaves a JSON text of what it saw.
_PROBE = """
var svg = document.getElementById("dag"), canvas = document.getElementById("canvas");
var n = JSON.parse(document.getElementById("dag-data").textContent).models.length;
function box(i) { return svg.querySelector('g.node[data-index="' + i + '"] rect').getBoundingClientRect(); }
function names(selector) {
  var data = JSON.parse(document.getElementById("dag-data").textContent);
  return Array.prototype.map.call(svg.querySelectorAll(selector),
                                  function (g) { return data.models[+g.getAttribute("data-index")].name; }).sort();
}
function geometry() {
  var rights = [], all = [];
  for (var i = 0; i < n; i++) { var r = box(i); rights.push(r.right); all.push([r.left, r.top, r.right, r.bottom]); }
  var c = canvas.getBoundingClientRect(), s = svg.getBoundingClientRect();
  return {window: window.innerWidth, canvas: [c.left, c.top, c.right, c.bottom], clientWidth: canvas.clientWidth,
          scrollWidth: canvas.scrollWidth, svg: [s.left, s.top, s.right, s.bottom], right: Math.max.apply(null, rights),
          boxes: all};
}
function panel() {
  var out = {hidden: document.getElementById("panel").hidden};
  ["name", "description", "kind", "owner", "cron", "last", "upstream", "downstream"].forEach(function (k) {
    out[k] = document.getElementById("panel-" + k).textContent;
  });
  return out;
}
function dimmed() {
  return Array.prototype.filter.call(svg.querySelectorAll("g.node"), function (g) {
    return parseFloat(getComputedStyle(g).opacity) < 0.5; }).length;
}
var result = {title: document.title, images: document.images.length, scripts: document.scripts.length};
"""


def _probe(page: Path, steps: str, **size) -> dict:
    return json.loads(run_in_page(page, _PROBE + steps + "\ndocument.body.dataset.result = JSON.stringify(result);",
                                  **size))


def generated_project(count: int = 300, seed: int = 3) -> tuple[list[DagNode], list[tuple[str, str]]]:
    """`count` models in ten schemas, each reading one to three models of earlier schemas; every third one
    not built yet, the others with a day's interval."""
    rng = random.Random(seed)
    kinds = sorted(KIND_COLOURS)
    nodes: list[DagNode] = []
    edges: list[tuple[str, str]] = []
    for i in range(count):
        layer = i * 10 // count
        nodes.append(DagNode(f"layer_{layer}.model_{i:03d}", rng.choice(kinds), owner=f"team_{i % 7}", cron="@daily",
                             last_interval=None if i % 3 == 0 else (1704067200000, 1704153600000)))
        if layer:
            first = layer * count // 10
            edges += [(nodes[rng.randrange(first)].name, nodes[i].name) for _ in range(rng.randint(1, 3))]
    return nodes, edges


def assert_no_overlaps(boxes: list[tuple[float, float, float, float]]) -> None:
    """No two (left, top, right, bottom) boxes share any area (sweep along x: only boxes of one column meet)."""
    ordered = sorted(boxes)
    for i, (l1, t1, r1, b1) in enumerate(ordered):
        for l2, t2, r2, b2 in ordered[i + 1:]:
            if l2 >= r1:
                break
            assert b1 <= t2 or b2 <= t1, f"{(l1, t1, r1, b1)} overlaps {(l2, t2, r2, b2)}"


def test_the_page_fits_a_1000px_window(tmp_path):
    """The picture scales to the window: at 1000 px every box of the shop shows, the rightmost too, and the
    SVG's viewBox holds exactly its content."""
    nodes, edges = skipping_shop()
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="shop")
    text = page.read_text()
    data = page_data(text)
    width, height = data["size"]
    svg_tag = re.search(r"<svg [^>]*>", text).group(0)
    assert f'viewBox="0 0 {width} {height}"' in svg_tag and 'width="100%"' in svg_tag
    right = max(m["x"] for m in data["models"]) + _NODE_W
    assert width > 1000 and right < width   # wider than the window at actual size, so it must scale
    seen = _probe(page, "result.geometry = geometry();", width=1000, height=700)["geometry"]
    assert seen["window"] == 1000 and seen["scrollWidth"] <= seen["clientWidth"]   # no horizontal scroll
    assert 0 <= seen["svg"][0] and seen["svg"][2] <= 1000 and seen["right"] <= 1000
    assert all(0 <= left and right <= 1000 and bottom <= 700 for left, _, right, bottom in seen["boxes"])

    png = screenshot(page, tmp_path / "dag-1000.png", width=1000, height=700)
    _, _, rows = png_pixels(png.read_bytes())
    counts = colour_counts(rows)
    scale = (seen["svg"][2] - seen["svg"][0]) / width
    for kind in {n.kind for n in nodes}:   # every box shows, scaled, in its colour
        fill = tuple(int(KIND_COLOURS[kind][i:i + 2], 16) for i in (1, 3, 5))
        boxes = sum(1 for n in nodes if n.kind == kind)
        assert counts.get(fill, 0) > boxes * _NODE_W * _NODE_H * scale * scale * 0.5, kind
    rightmost = max(nodes, key=lambda n: next(m["x"] for m in data["models"] if m["name"] == n.name))
    fill = bytes(int(KIND_COLOURS[rightmost.kind][i:i + 2], 16) for i in (1, 3, 5))
    x = round(seen["boxes"][[n.name for n in nodes].index(rightmost.name)][2]) - 6
    assert any(row[3 * x:3 * x + 3] == fill for row in rows), "the rightmost box is not on screen"


def test_300_models_lay_out_without_overlaps_and_scroll_at_1000px(tmp_path):
    nodes, edges = generated_project()
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="300 models")
    text = page.read_text()
    data = page_data(text)
    width, height = data["size"]
    boxes = [(m["x"], m["y"], m["x"] + _NODE_W, m["y"] + _NODE_H) for m in data["models"]]
    assert len(boxes) == 300 and len(data["edges"]) == len(set(edges))
    assert_no_overlaps(boxes)
    assert all(0 <= left and right <= width and 0 <= top and bottom <= height for left, top, right, bottom in boxes)
    # the JSON and the SVG agree, and the viewBox is the content's: margins of 20 all round
    drawn = boxes_of(text)
    assert all(drawn[m["name"]][:2] == pytest.approx((m["x"], m["y"]), abs=0.06) for m in data["models"])
    assert min(b[0] for b in boxes) == 20 and max(b[2] for b in boxes) == width - 20
    assert min(b[1] for b in boxes) >= 20 and max(b[3] for b in boxes) <= height - 20 + 1   # (an edge's lane may be outermost)

    seen = _probe(page, """
result.first = geometry();
document.getElementById("zoom-fit").click();
result.fit = geometry();
""", width=1000, height=800)
    first, fit = seen["first"], seen["fit"]
    # too wide to read when fitted: drawn at half size, the canvas scrolls to the rightmost box
    assert first["scrollWidth"] > first["clientWidth"] and first["right"] <= first["canvas"][0] + first["scrollWidth"]
    assert (first["svg"][2] - first["svg"][0]) == pytest.approx(width / 2, abs=1)
    assert_no_overlaps([tuple(b) for b in first["boxes"]])   # as the browser drew them
    # "Fit": all of it in the window's width
    assert fit["scrollWidth"] <= fit["clientWidth"] and fit["right"] <= 1000
    screenshot(page, tmp_path / "dag-300.png", width=1000, height=800)


def test_search_highlights_matches_and_a_click_lights_upstream_and_downstream(tmp_path):
    nodes, edges = skipping_shop()
    nodes = [DagNode(n.name, n.kind, owner="data-team" if n.name == "shop.customers" else None, cron="@hourly",
                     description="Customers, one row each" if n.name == "shop.customers" else None,
                     last_interval=(1704067200000, 1704153600000) if n.name == "shop.customers" else None)
             for n in nodes]
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="shop")
    index = {n.name: i for i, n in enumerate(nodes)}
    seen = _probe(page, f"""
var search = document.getElementById("search");
search.value = "CUST"; search.dispatchEvent(new Event("input"));
result.matches = names("g.node.match"); result.count = document.getElementById("count").textContent;
result.searchDimmed = dimmed();
search.value = ""; search.dispatchEvent(new Event("input"));
result.cleared = names("g.node.match").length;
svg.querySelector('g.node[data-index="{index["shop.customers"]}"] rect')
   .dispatchEvent(new MouseEvent("click", {{bubbles: true}}));
result.selected = names("g.node.selected"); result.up = names("g.node.up"); result.down = names("g.node.down");
result.litEdges = svg.querySelectorAll("path.edge.on").length; result.dimmed = dimmed();
result.panel = panel();
svg.querySelector('g.node[data-index="{index["shop.report"]}"] text')
   .dispatchEvent(new MouseEvent("click", {{bubbles: true}}));
result.report = panel();
search.value = "top_"; search.dispatchEvent(new KeyboardEvent("keydown", {{key: "Enter"}}));
result.entered = names("g.node.selected");
document.dispatchEvent(new KeyboardEvent("keydown", {{key: "Escape"}}));
result.afterEscape = {{selected: names("g.node.selected").length, dimmed: dimmed(), hidden: panel().hidden}};
search.dispatchEvent(new KeyboardEvent("keydown", {{key: "Escape"}}));
result.searchEscaped = {{value: search.value, dimmed: dimmed(), count: document.getElementById("count").textContent}};
""")
    customers = {"shop.customers", "shop.customer_revenue", "shop.raw_customers", "shop.top_customers"}
    assert seen["matches"] == sorted(customers) and seen["count"] == "4 of 8 models match"
    assert seen["searchDimmed"] == 4 and seen["cleared"] == 0
    graph = {n.name: [p for p, c in edges if c == n.name] for n in nodes}
    up, down = reachable(graph, ["shop.customers"]) - {"shop.customers"}, reachable(
        children_of(graph), ["shop.customers"]) - {"shop.customers"}
    assert seen["selected"] == ["shop.customers"]
    assert seen["up"] == sorted(up) == ["shop.raw_customers"]
    assert seen["down"] == sorted(down) == ["shop.customer_revenue", "shop.report", "shop.top_customers"]
    lit = {(p, c) for p, c in edges if {p, c} <= up | {"shop.customers"} or {p, c} <= down | {"shop.customers"}}
    assert seen["litEdges"] == len(lit) == 5   # paths from raw_customers, and on down to the report
    assert seen["dimmed"] == len(nodes) - 1 - len(up) - len(down)
    assert seen["panel"] == {"hidden": False, "name": "shop.customers", "description": "Customers, one row each",
                             "kind": "INCREMENTAL_BY_UNIQUE_KEY", "owner": "data-team", "cron": "@hourly",
                             "last": "2024-01-01 – 2024-01-02 (UTC, end exclusive)", "upstream": "1 model",
                             "downstream": "3 models"}
    assert seen["report"]["name"] == "shop.report" and seen["report"]["last"] == "not built yet"
    assert seen["report"]["owner"] == "no owner set" and seen["report"]["downstream"] == "0 models"
    assert seen["entered"] == ["shop.top_customers"]
    # Escape clears the selection; the search still dims what does not match, until Escape in the search box
    assert seen["afterEscape"] == {"selected": 0, "dimmed": len(nodes) - 1, "hidden": True}
    assert seen["searchEscaped"] == {"value": "", "dimmed": 0, "count": ""}


HOSTILE = ("db.</script><script>document.title='pwned'</script>",
           "db.<img src=x onerror=\"document.title='pwned'\">",
           "db.\"quoted\" & <b>bold</b>")


def test_hostile_names_owners_and_descriptions_stay_text(tmp_path):
    nodes = [DagNode(name, "FULL", owner=f"<img src=x onerror=\"document.title='pwned'\"> {i}",
                     description="<script>document.title='pwned'</script>", cron="@daily & <now>")
             for i, name in enumerate(HOSTILE)]
    edges = [(HOSTILE[0], HOSTILE[1]), (HOSTILE[1], HOSTILE[2])]
    page = write_dag(tmp_path / "dag.html", nodes, edges, title="<script>document.title='pwned'</script>")
    text = page.read_text()
    assert "<script>document" not in text and "<img" not in text and "<b>" not in text
    assert text.count("</script>") == 2   # the data block's and the page script's own
    data = page_data(text)
    assert [m["name"] for m in data["models"]] == list(HOSTILE) and data["models"][0]["owner"].startswith("<img")
    assert set(boxes_of(text)) == set(HOSTILE)
    svg = write_dag(tmp_path / "dag.svg", nodes, edges).read_text()
    assert "<script" not in svg and "<img" not in svg and set(boxes_of(svg)) == set(HOSTILE)
    seen = _probe(page, """
svg.querySelector('g.node[data-index="1"] rect').dispatchEvent(new MouseEvent("click", {bubbles: true}));
result.panel = panel(); result.up = names("g.node.up");
var search = document.getElementById("search");
search.value = "<\\/script>"; search.dispatchEvent(new Event("input"));
result.matches = names("g.node.match");
result.heading = document.querySelector("h1").textContent;
""")
    assert seen["title"] == "<script>document.title='pwned'</script>" == seen["heading"]
    assert seen["images"] == 0 and seen["scripts"] == 3   # the data block, the page's script and the probe
    assert seen["panel"]["name"] == HOSTILE[1] and seen["panel"]["owner"].startswith("<img src=x")
    assert seen["panel"]["description"] == "<script>document.title='pwned'</script>"
    assert seen["up"] == [HOSTILE[0]] and seen["matches"] == [HOSTILE[0]]


def test_meshbot_dag_shows_each_model_s_last_interval_in_prod_from_the_state(tmp_path):
    """With state, the page's panel shows each model's last recorded interval in prod (read through the
    context, no Spark); a model prod has no interval for is "not built yet"."""
    from dataclasses import replace

    from click.testing import CliRunner
    from ops_project import write_ops_project
    from test_state_store import env_of, make_snapshot

    from bot.cli import cli
    from bot.context import Context

    root = write_ops_project(tmp_path / "ops")
    context = Context(root)
    assert context.last_intervals() is None and not (root / ".meshbot" / "state.db").exists()
    hourly = replace(make_snapshot("ops.hourly", 1), kind="INCREMENTAL_BY_TIME_RANGE")
    daily = make_snapshot("ops.daily", 2)
    state = context.state   # created here, as a plan would
    assert context.last_intervals() == {}   # a state, but no prod yet
    state.push_snapshots([hourly, daily])
    state.promote(env_of("prod", "p1", hourly, daily), expected_plan_id=None)
    day = 86_400_000
    start = 1_704_067_200_000   # 2024-01-01
    state.add_interval("ops.hourly", hourly.version, (start, start + 2 * day))
    state.add_interval("ops.hourly", hourly.version, (start + 3 * day, start + 3 * day + 5 * 3_600_000))
    state.add_interval("ops.hourly", hourly.version, (start + 9 * day, start + 10 * day), is_dev=True)
    assert context.last_intervals() == {"ops.hourly": (start + 3 * day, start + 3 * day + 5 * 3_600_000)}
    context.close()

    result = CliRunner().invoke(cli, ["-p", str(root), "dag", str(tmp_path / "dag.html")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    models = {m["name"]: m for m in page_data((tmp_path / "dag.html").read_text())["models"]}
    assert models["ops.hourly"]["last"] == "2024-01-04 00:00 – 2024-01-04 05:00 (UTC, end exclusive)"
    assert models["ops.daily"]["last"] is None   # shown as "not built yet"
    assert models["ops.hourly"]["cron"] == "@hourly" and models["ops.hourly"]["description"] == "one row per hour"
    assert models["ops.daily"]["kind"] == "FULL" and models["ops.daily"]["owner"] is None
