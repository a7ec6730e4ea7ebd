"""Dev environments hold views only for the models they promoted, as SQLMesh 0.236.4 without
include_unmodified (checked there on DuckDB with the same three models): Spark's catalog, state,
and what reads an environment's models (render, the tables of an environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.state.protocol import Environment, EnvironmentSnapshot
from bot.state.serialize import environment_to_row, row_to_environment
from project_files import LOCAL_SPARK_SQLITE_CONFIG, write_files

MODELS = {
    "a": "MODEL (name pv.a, kind FULL);\n\nSELECT 1 AS x",
    "b": "MODEL (name pv.b, kind FULL);\n\nSELECT x, 2 AS y FROM pv.a",
    "c": "MODEL (name pv.c, kind FULL);\n\nSELECT 3 AS z",
}


def _write(root: Path, **changed: str) -> None:
    write_files(root, {"config.yaml": LOCAL_SPARK_SQLITE_CONFIG,
                       **{f"models/{name}.sql": changed.get(name, text) for name, text in MODELS.items()}})


def _apply(root: Path, env: str, options: PlanOptions = PlanOptions()) -> Context:
    context = Context(root)
    context.apply(context.plan(env, options=options))
    return context


def _views(spark, schema: str) -> set[str]:
    if schema not in {row[0] for row in spark.sql("SHOW DATABASES").collect()}:
        return set()
    return {row.tableName for row in spark.sql(f"SHOW TABLES IN {schema}").collect()}


B_CHANGED = "MODEL (name pv.b, kind FULL);\n\nSELECT x, 20 AS y FROM pv.a"
C_CHANGED = "MODEL (name pv.c, kind FULL);\n\nSELECT 30 AS z"
A_CHANGED = "MODEL (name pv.a, kind FULL);\n\nSELECT 10 AS x"


@pytest.fixture
def project(tmp_path, clean_catalog):
    root = tmp_path / "pv"
    _write(root)
    _apply(root, "prod").close()
    return root


def test_dev_views_accumulate_the_promoted_models(project, spark):
    # 1. change b: dev holds b only; the other models are read from prod's tables
    _write(project, b=B_CHANGED)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"b"}
    dev = context.state.get_environment("dev")
    prod = context.state.get_environment("prod")
    assert {s.name for s in dev.snapshots} == {"pv.a", "pv.b", "pv.c"}
    assert set(dev.views()) == {"pv__dev.b"}
    assert dev.table_of("pv.a") == prod.table_of("pv.a")
    assert context.fetchdf("SELECT x, y FROM pv__dev.b") == [{"x": 1, "y": 20}]
    # a query of the dev environment reads the view of b and prod's table of a
    rendered = context.render("pv.b", environment="dev")
    assert prod.table_of("pv.a").split(".")[-1] in rendered
    assert context.table_in("dev", "pv.c") == prod.table_of("pv.c")
    context.close()

    # 2. b back to prod's, c changed: b was a change against dev, so it is promoted again (prod's table)
    _write(project, c=C_CHANGED)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"b", "c"}
    assert context.fetchdf("SELECT y FROM pv__dev.b") == [{"y": 2}]
    context.close()

    # 3. the project equal to prod again: the views stay
    _write(project)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"b", "c"}
    assert context.fetchdf("SELECT z FROM pv__dev.c") == [{"z": 3}]
    context.close()

    # 4. a changed: a and its indirectly modified child b, with c kept
    _write(project, a=A_CHANGED)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"a", "b", "c"}
    assert context.fetchdf("SELECT x, y FROM pv__dev.b") == [{"x": 10, "y": 2}]
    context.close()

    assert _views(spark, "pv") == {"a", "b", "c"}     # prod holds every view


def test_changed_parent_promotes_its_children_only(project, spark):
    _write(project, a=A_CHANGED)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"a", "b"}
    assert not context.state.get_environment("dev").by_name()["pv.c"].promoted
    context.close()


def test_include_unmodified_creates_every_view(project, spark):
    context = _apply(project, "dev2", PlanOptions(include_unmodified=True))
    assert _views(spark, "pv__dev2") == {"a", "b", "c"}
    assert all(s.promoted for s in context.state.get_environment("dev2").snapshots)
    context.close()
    # then a plan without it keeps them (an environment's promoted models stay promoted)
    _write(project, c=C_CHANGED)
    _apply(project, "dev2").close()
    assert _views(spark, "pv__dev2") == {"a", "b", "c"}


def test_include_unmodified_on_an_existing_environment_adds_the_missing_views(project, spark):
    _write(project, b=B_CHANGED)
    _apply(project, "dev").close()
    assert _views(spark, "pv__dev") == {"b"}
    _apply(project, "dev", PlanOptions(include_unmodified=True)).close()
    assert _views(spark, "pv__dev") == {"a", "b", "c"}


def test_rollback_serves_the_earlier_plan_s_views_only(project, spark):
    _write(project, b=B_CHANGED)
    _apply(project, "dev").close()
    _write(project, b=B_CHANGED, c=C_CHANGED)
    context = _apply(project, "dev")
    assert _views(spark, "pv__dev") == {"b", "c"}
    context.rollback("dev")
    assert _views(spark, "pv__dev") == {"b"}
    assert set(context.state.get_environment("dev").views()) == {"pv__dev.b"}
    context.close()


def test_janitor_drops_the_promoted_views_and_the_schema(project, spark):
    _write(project, c=C_CHANGED)
    context = _apply(project, "dev")
    result = context.invalidate("dev", sync=True)
    assert result.views == ("pv__dev.c",) and result.schemas == ("pv__dev",)
    assert _views(spark, "pv__dev") == set() and _views(spark, "pv") == {"a", "b", "c"}
    context.close()


def _listed(name: str, *, promoted: bool = True) -> EnvironmentSnapshot:
    return EnvironmentSnapshot(name=name, identifier="1", version="1", kind="FULL",
                               table_name=f"sqlmesh__db.{name.replace('.', '__')}__1", promoted=promoted)


def test_environment_rows_keep_what_is_promoted_and_old_rows_read_as_all():
    env = Environment(name="dev", snapshots=(_listed("db.a", promoted=False), _listed("db.b")), plan_id="p",
                      previous_snapshots=(_listed("db.a"), _listed("db.c")))
    row = environment_to_row(env)
    assert "promoted" not in row["snapshots"][1]            # a promoted model is stored as before
    again = row_to_environment(row)
    assert again == env
    assert again.views() == {"db__dev.b": "sqlmesh__db.db__b__1"}
    assert sorted(again.stale_views()) == ["db__dev.a", "db__dev.c"]
    assert again.query_names() == {"db.a": "sqlmesh__db.db__a__1", "db.b": "db__dev.b"}
    # a row written before `promoted` existed: every model has its view
    for listed in row["snapshots"]:
        listed.pop("promoted", None)
    old = row_to_environment(row)
    assert set(old.views()) == {"db__dev.a", "db__dev.b"} and old.stale_views() == ["db__dev.c"]
