"""The dependency graph: stable topological order, cycles, upstream/downstream, selectors, and speed at scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError, CycleError, PlanError
from bot.project.dag import (DAG, children_of, reachable, select_models, topological_order,
                             upstream_of)
from bot.project.model import Kind, Model


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
