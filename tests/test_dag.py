"""The dependency graph: stable topological order, cycles, upstream/downstream, selectors, and speed at scale."""

from __future__ import annotations

import html
import random
import re
from pathlib import Path

import pytest
from dag_screenshot import colour_counts, png_pixels, screenshot

from bot.errors import ConfigError, CycleError, PlanError
from bot.project.dag import (DAG, children_of, reachable, select_models, topological_order,
                             upstream_of)
from bot.project.model import Kind, Model
from bot.report.dag_html import _NODE_H, _NODE_W, KIND_COLOURS, DagNode, dag_svg, layers, write_dag


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

_RECT = re.compile(r'<g class="node" data-kind="[^"]*"><title>([^<]*) \([^<]*\)</title>'
                   r'<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)"')
_EDGE = re.compile(r'<path class="edge" data-parent="([^"]*)" data-child="([^"]*)" d="([^"]*)"')


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
    assert "<script" not in page and "https://" not in page and "http://www.w3.org/2000/svg" in page
    assert "<link" not in page and "url(" not in page.replace("url(#arrow)", "")
    assert page.count('class="edge"') == len(edges)


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
