"""kind CUSTOM: materializations from materializations/*.py and entry points write through the Spark adapter,
with the values SQLMesh 0.236.4 gives on DuckDB for the same project."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import ConfigError, EngineError
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from project_files import write_files

CONFIG = """
gateways:
  local:
    connection:
      type: spark
      master: local[2]
    state_connection:
      type: sqlite
      database: .meshbot/state.db
default_gateway: local
model_defaults:
  dialect: duckdb
  start: '2024-01-01'
"""

SRC = "MODEL (name db.src, kind FULL);\nSELECT 1 AS id, 'a' AS v UNION ALL SELECT 2 AS id, 'b' AS v\n"

FULL_MODEL = """MODEL (
  name db.m,
  kind CUSTOM (
    materialization 'custom_full',
    materialization_properties (mode = 'x', n = 2, flag = true, e = x + 1)
  ),
  cron '@daily'
);
SELECT id, v FROM db.src
"""

KEYED_MODEL = """MODEL (
  name db.k,
  kind CUSTOM (materialization 'KeyedAppend', materialization_properties (key = 'id')),
  cron '@daily'
);
SELECT id, v, @start_ds AS ds FROM db.src
"""

# SQLMesh's examples/sushi `custom_full`, unchanged but for the log line
SUSHI_FULL = '''from __future__ import annotations

import json
import typing as t

from sqlmesh import CustomMaterialization, Model

if t.TYPE_CHECKING:
    from sqlmesh import QueryOrDF


class CustomFullMaterialization(CustomMaterialization):
    NAME = "custom_full"

    def insert(
        self,
        table_name: str,
        query_or_df: QueryOrDF,
        model: Model,
        is_first_insert: bool,
        render_kwargs: t.Dict[str, t.Any],
        **kwargs: t.Any,
    ) -> None:
        with open(LOG, "a") as f:
            f.write(json.dumps(dict(first=is_first_insert, query=type(query_or_df).__name__,
                                    start=render_kwargs["start"], end=render_kwargs["end"],
                                    props={k: repr(v) for k, v in model.kind.materialization_properties.items()},
                                    name=model.name)) + "\\n")
        self._replace_query_for_model(model, table_name, query_or_df, render_kwargs)
'''

KEYED = '''from sqlmesh import CustomMaterialization


class KeyedAppend(CustomMaterialization):
    def insert(self, table_name, query_or_df, model, is_first_insert, **kwargs):
        key = model.kind.materialization_properties["key"]
        if is_first_insert:
            self._replace_query_for_model(model, table_name, query_or_df, kwargs["render_kwargs"])
        else:
            self.adapter.delete_from(table_name, f"{key} = 2")
            self.adapter.insert_append(table_name, query_or_df)
'''


PYTHON_MODEL = """import pandas as pd
from sqlmesh import model


@model("db.py", kind=dict(name="CUSTOM", materialization="custom_full",
                          materialization_properties={"mode": "py"}), columns={"id": "int", "v": "text"})
def execute(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"id": [7], "v": ["p"]})
"""


def _project(root: Path) -> Path:
    log = root / "calls.jsonl"
    return write_files(root, {
        "config.yaml": CONFIG, "models/src.sql": SRC, "models/m.sql": FULL_MODEL, "models/k.sql": KEYED_MODEL,
        "models/py.py": PYTHON_MODEL,
        "materializations/custom_full.py": SUSHI_FULL.replace("LOG", repr(str(log))),
        "materializations/keyed.py": KEYED})


def _rows(context: Context, sql: str) -> list[tuple]:
    return [tuple(row.values()) for row in context.fetchdf(sql)]


def test_sushi_custom_full_and_adapter_writes_match_sqlmesh(tmp_path, clean_catalog):
    root = _project(tmp_path / "p")
    context = Context(root)
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-03 01:00:00")))
        # SQLMesh 0.236.4 (DuckDB, same project, plan at 2024-01-03 01:00 UTC)
        assert _rows(context, "SELECT * FROM db.m ORDER BY id") == [(1, "a"), (2, "b")]
        assert _rows(context, "SELECT * FROM db.k ORDER BY id, ds") == [(1, "a", "2024-01-01"), (2, "b", "2024-01-01")]
        calls = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
        [call] = [c for c in calls if c["name"] == "db.m"]
        [python] = [c for c in calls if c["name"] == "db.py"]
        assert (python["query"], python["props"]) == ("DataFrame", {"mode": "'py'"})
        assert _rows(context, "SELECT * FROM db.py") == [(7, "p")]
        assert call == {"first": True, "query": "Select", "start": 1704067200000, "end": 1704240000000,
                        "props": {"mode": "'x'", "n": "2", "flag": "True", "e": call["props"]["e"]},
                        "name": "db.m"}
        assert call["props"]["e"].startswith("Add(")     # a non-literal stays an expression

        context.run(execution_time="2024-01-04 01:00:00")
        # SQLMesh: `run` at 2024-01-04 01:00 UTC deletes key 2, then appends the new day's rows
        assert _rows(context, "SELECT * FROM db.k ORDER BY ds, id") == [
            (1, "a", "2024-01-01"), (1, "a", "2024-01-03"), (2, "b", "2024-01-03")]
        [second] = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()[len(calls):]
                    if json.loads(line)["name"] == "db.m"]
        assert (second["first"], second["start"], second["end"]) == (False, 1704240000000, 1704326400000)
    finally:
        context.close()


def test_unknown_materialization_and_missing_adapter_method_are_named(tmp_path, clean_catalog):
    root = write_files(tmp_path / "e", {"config.yaml": CONFIG, "models/src.sql": SRC,
                                        "models/a.sql": "MODEL (\n  name db.a,\n  kind CUSTOM (materialization 'nope')\n);\n"
                                                        "SELECT 1 AS id"})
    with pytest.raises(ConfigError, match=r"a.sql:3: model db.a: custom materialization `nope` not found"):
        load_project(root, use_cache=False)
    (root / "models" / "a.sql").write_text("MODEL (name db.a, kind CUSTOM (materialization 'odd'));\nSELECT 1 AS id")
    (root / "materializations").mkdir()
    (root / "materializations" / "odd.py").write_text(
        "from sqlmesh.core.snapshot.evaluator import CustomMaterialization\n\n\n"
        "class Odd(CustomMaterialization):\n    def insert(self, table_name, query_or_df, model, is_first_insert, **kw):\n"
        "        self.adapter.alter_table([])\n")
    context = Context(root)
    try:
        with pytest.raises(EngineError, match=r"model db.a: custom materialization `odd` calls `adapter.alter_table`, "
                                              r"which meshbot's Spark adapter does not offer"):
            context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02 01:00:00")))
    finally:
        context.close()


def test_spark_adapter_methods_on_parquet_tables(engine_schema):
    import pandas as pd
    from sqlglot import exp

    from bot.spark.adapter import SparkAdapter

    engine, schema = engine_schema
    adapter = SparkAdapter(engine, materialization="m", model="db.m")
    table = f"{schema}.t"
    adapter.create_table(table, {"id": exp.DataType.build("int"), "ds": exp.DataType.build("date"),
                                 "v": exp.DataType.build("text")})
    assert adapter.table_exists(table) and not adapter.table_exists(f"{schema}.nope")
    assert {k: v.sql("spark") for k, v in adapter.columns(table).items()} == {"id": "INT", "ds": "DATE", "v": "STRING"}
    adapter.insert_append(table, exp.maybe_parse("SELECT 1 AS id, DATE '2024-01-01' AS ds, 'a' AS v UNION ALL "
                                                 "SELECT 2, DATE '2024-01-02', 'b'", dialect="spark"))
    adapter.merge(table, pd.DataFrame({"id": [2, 3], "ds": [pd.Timestamp("2024-01-02").date()] * 2, "v": ["B", "c"]}),
                  unique_key=[exp.column("id")])
    assert adapter.fetchall(f"SELECT id, v FROM {table} ORDER BY id") == [(1, "a"), (2, "B"), (3, "c")]

    def as_date(moment, _types):
        return exp.cast(exp.Literal.string(moment.strftime("%Y-%m-%d")), "date")

    adapter.insert_overwrite_by_time_partition(
        table, f"SELECT 9 AS id, ds, 'z' AS v FROM {table}", start=1704153600000, end=1704240000000,
        time_formatter=as_date, time_column="ds")   # [2024-01-02, 2024-01-03): rows outside the span are kept
    assert adapter.fetchall(f"SELECT id, CAST(ds AS STRING), v FROM {table} ORDER BY id") == [
        (1, "2024-01-01", "a"), (9, "2024-01-02", "z"), (9, "2024-01-02", "z")]
    adapter.delete_from(table, exp.condition("id = 9"))
    assert adapter.fetchone(f"SELECT COUNT(*) FROM {table}") == (1,)
    adapter.replace_query(table, "SELECT 5 AS id, DATE '2024-02-01' AS ds, 'r' AS v")
    assert list(adapter.fetchdf(f"SELECT id FROM {table}")["id"]) == [5]
    adapter.delete_from(table)
    assert adapter.fetchone(f"SELECT COUNT(*) FROM {table}") == (0,)
    assert not hasattr(adapter, "wap_prepare")
    with pytest.raises(EngineError, match=r"custom materialization `m` calls `adapter.wap_prepare`"):
        adapter.wap_prepare(table, "x")


# SQLMesh's examples/sushi `custom_full_with_custom_kind`, plus a `create` of its own
CUSTOM_KIND = '''from __future__ import annotations

import typing as t

from sqlmesh import CustomMaterialization, CustomKind, Model
from sqlmesh.utils.pydantic import validate_string

if t.TYPE_CHECKING:
    from sqlmesh import QueryOrDF


class ExtendedCustomKind(CustomKind):
    @property
    def custom_property(self) -> str:
        return validate_string(self.materialization_properties.get("custom_property"))


class CustomFullWithCustomKindMaterialization(CustomMaterialization[ExtendedCustomKind]):
    NAME = "custom_full_with_custom_kind"

    def insert(
        self,
        table_name: str,
        query_or_df: QueryOrDF,
        model: Model,
        is_first_insert: bool,
        **kwargs: t.Any,
    ) -> None:
        assert type(model.kind).__name__ == "ExtendedCustomKind"
        self._replace_query_for_model(model, table_name, query_or_df)
        self.adapter.execute(f"INSERT INTO {table_name} SELECT 0, '{model.kind.custom_property}'")

    def create(self, table_name, model, is_table_deployable, render_kwargs, **kwargs):
        self.adapter.create_table(table_name, {"id": "INT", "note": "STRING"})
'''


def test_custom_kind_subclass_and_own_create(tmp_path, engine_schema):
    from bot.project.model import Kind, KindName, Model
    from bot.spark.materialize import create_physical, evaluate

    engine, schema = engine_schema
    root = write_files(tmp_path / "ck", {"config.yaml": CONFIG, "materializations/custom_kind.py": CUSTOM_KIND,
                                         "models/latest.sql": "-- stand-in"})
    kind = Kind(name=KindName.CUSTOM, materialization="custom_full_with_custom_kind",
                materialization_properties="(custom_property = 'sushi!!!')")
    model = Model(name="sushi.latest_order", kind=kind, dialect="duckdb", path=root / "models" / "latest.sql")
    table = f"{schema}.latest__1"
    create_physical(engine, kind=kind, table=table, query_sql="SELECT 1 AS id, 'x' AS v", columns=None, model=model)
    assert engine.columns(table) == [("id", "INT"), ("note", "STRING")]    # its create, not the query's columns
    evaluate(engine, kind=kind, table=table, query="SELECT 1 AS id, 'x' AS note", start=0, end=1,
             execution_time=1, first_run=True, model=model)
    assert [tuple(r.values()) for r in engine.fetch(f"SELECT * FROM {table} ORDER BY id")] == [
        (0, "sushi!!!"), (1, "x")]


def test_materializations_from_entry_points_and_the_project_folder(tmp_path, monkeypatch):
    from bot.project import materializations

    site = write_files(tmp_path / "site", {
        "mesh_mats/__init__.py": "from sqlmesh import CustomMaterialization\n\n\n"
                                 "class PackagedFull(CustomMaterialization):\n    NAME = 'packaged_full'\n",
        "mesh_mats-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: mesh-mats\nVersion: 0.1\n",
        "mesh_mats-0.1.dist-info/entry_points.txt":
            "[sqlmesh.materializations]\npackaged_full = mesh_mats:PackagedFull\n"})
    root = write_files(tmp_path / "proj", {"config.yaml": CONFIG, "materializations/local.py": KEYED})
    monkeypatch.syspath_prepend(str(site))
    materializations._load_cached.cache_clear()
    found = materializations.load_materializations(root)
    assert sorted(found) == ["keyedappend", "packaged_full"]
    assert found["packaged_full"].__module__ == "mesh_mats"
    (site / "mesh_mats-0.1.dist-info" / "entry_points.txt").write_text(
        "[sqlmesh.materializations]\nbad = mesh_mats:CustomMaterialization.__init__\n")
    materializations._load_cached.cache_clear()
    with pytest.raises(ConfigError, match=r"entry point `bad` \(mesh_mats:CustomMaterialization.__init__\) must be "
                                          r"a subclass of CustomMaterialization"):
        materializations.load_materializations(root)
    materializations._load_cached.cache_clear()
    monkeypatch.delitem(sys.modules, "mesh_mats", raising=False)
