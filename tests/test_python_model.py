"""Tests for bot.project.python_model: the @model decorator, loading models/*.py, resolving the function."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from bot.errors import ConfigError
from bot.project.config import ModelDefaults
from bot.project.model import AuditRef, KindName
from bot.project.python_model import load_python_models, parse_kind, resolve_python_model

SOURCE = '''
import pandas as pd
from bot import model

HELPER_FACTOR = 3


def helper(value):
    return value * HELPER_FACTOR


@model(
    "Shop.Daily_Totals",
    kind={"name": "INCREMENTAL_BY_TIME_RANGE", "time_column": "ds", "batch_size": 7},
    columns={"ds": "date", "total": "bigint", "label": "text"},
    depends_on=["shop.orders", "customers"],
    cron="@hourly",
    start="2024-01-01",
    grain=["ds"],
    owner="ann",
    tags=["finance"],
    audits=["not_null_non_blocking", ("accepted_range", {"column": "total", "min_v": 0, "blocking": False})],
)
def execute(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"ds": [start], "total": [helper(kwargs.get("n", 1))], "label": ["x"]})


@model("plain", kind="FULL", columns={"id": "int"})
def other(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"id": [1]})
'''


def _write(tmp_path: Path, source: str = SOURCE, name: str = "totals.py") -> Path:
    path = tmp_path / "models" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def test_loads_models_with_their_properties(tmp_path: Path) -> None:
    path = _write(tmp_path)
    first, second = load_python_models(path, defaults=ModelDefaults(dialect="duckdb", owner="team"))
    assert first.name == "shop.daily_totals"
    assert first.kind.name is KindName.INCREMENTAL_BY_TIME_RANGE
    assert (first.kind.time_column, first.kind.batch_size) == ("ds", 7)
    assert first.columns == (("ds", "DATE"), ("total", "BIGINT"), ("label", "STRING"))
    assert first.depends_on == frozenset({"shop.orders", "default.customers"})
    assert first.depends_on_explicit == ("shop.orders", "default.customers")
    assert (first.cron, first.start, first.grains, first.owner, first.tags) == \
        ("@hourly", "2024-01-01", ("ds",), "ann", ("finance",))
    assert first.audits == (AuditRef("not_null_non_blocking"),
                            AuditRef("accepted_range", (("column", "total"), ("min_v", "0")), blocking=False))
    assert first.is_python and first.query is None
    assert first.python_entrypoint == "execute" and first.python_source == path.read_text()
    assert (second.name, second.kind.name, second.owner, second.cron) == ("default.plain", KindName.FULL, "team", "@daily")


def test_resolved_function_runs_from_stored_source(tmp_path: Path) -> None:
    path = _write(tmp_path)
    model = load_python_models(path, defaults=ModelDefaults())[0]
    path.unlink()  # evaluation must not need the file any more
    execute = resolve_python_model(model)
    frame = execute(None, "2024-01-01", "2024-01-02", "2024-01-03", n=2)
    assert isinstance(frame, pd.DataFrame)
    assert frame.to_dict("records") == [{"ds": "2024-01-01", "total": 6, "label": "x"}]


def test_modules_do_not_share_state(tmp_path: Path) -> None:
    a = load_python_models(_write(tmp_path / "a", SOURCE), defaults=ModelDefaults())[0]
    b_source = SOURCE.replace("HELPER_FACTOR = 3", "HELPER_FACTOR = 10")
    b = load_python_models(_write(tmp_path / "b", b_source), defaults=ModelDefaults())[0]
    assert resolve_python_model(a)(None, 0, 0, 0)["total"][0] == 3
    assert resolve_python_model(b)(None, 0, 0, 0)["total"][0] == 10


def test_import_error_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "from bot import model\n\nimport not_a_real_module_xyz\n", name="bad.py")
    with pytest.raises(ConfigError, match=r"bad.py:3: cannot import Python model file: ModuleNotFoundError"):
        load_python_models(path, defaults=ModelDefaults())


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x = 1\ndef broken(:\n", name="syntax.py")
    with pytest.raises(ConfigError, match=r"syntax.py:2: cannot import Python model file: SyntaxError"):
        load_python_models(path, defaults=ModelDefaults())


def test_columns_are_required(tmp_path: Path) -> None:
    path = _write(tmp_path, "from bot import model\n@model('db.x', kind='FULL')\ndef f(context, **kw):\n    pass\n")
    with pytest.raises(ConfigError, match="Python model db.x must declare its `columns`"):
        load_python_models(path, defaults=ModelDefaults())


def test_bad_column_type_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "from bot import model\n@model('db.x', columns={'a': 'not a type('})\ndef f(context, **kw):\n    pass\n")
    with pytest.raises(ConfigError, match="column `a` has an unknown type `not a type\\(`"):
        load_python_models(path, defaults=ModelDefaults())


@pytest.mark.parametrize(("value", "name"), [
    ("full", KindName.FULL), ({"name": "VIEW"}, KindName.VIEW), (None, KindName.FULL),
    ({"name": "INCREMENTAL_BY_UNIQUE_KEY", "unique_key": ["ID", "b"]}, KindName.INCREMENTAL_BY_UNIQUE_KEY),
])
def test_parse_kind_accepts_names_and_dicts(value, name: KindName) -> None:
    assert parse_kind(value, default=None, path=Path("m.py")).name is name


def test_parse_kind_properties_and_errors() -> None:
    kind = parse_kind({"name": "incremental_by_time_range", "time_column": ("DS", "%Y%m%d"),
                       "lookback": 2, "on_destructive_change": "WARN"}, default=None, path=Path("m.py"))
    assert (kind.time_column, kind.time_column_format, kind.lookback, kind.on_destructive_change.value) == \
        ("ds", "%Y%m%d", 2, "warn")
    assert parse_kind({"name": "INCREMENTAL_BY_UNIQUE_KEY", "unique_key": "ID"},
                      default=None, path=Path("m.py")).unique_key == ("id",)
    with pytest.raises(ConfigError, match="unknown model kind `NOPE`"):
        parse_kind("NOPE", default=None, path=Path("m.py"))
    with pytest.raises(ConfigError, match="requires `time_column`"):
        parse_kind("INCREMENTAL_BY_TIME_RANGE", default=None, path=Path("m.py"))
    with pytest.raises(ConfigError, match="unknown property `colour` for kind FULL"):
        parse_kind({"name": "FULL", "colour": 1}, default=None, path=Path("m.py"))


def test_resolving_a_sql_model_is_an_error(tmp_path: Path) -> None:
    model = load_python_models(_write(tmp_path), defaults=ModelDefaults())[0]
    with pytest.raises(ConfigError, match="is not a Python model"):
        resolve_python_model(replace(model, python_entrypoint=None))


SQLMESH_SOURCE = '''
import typing as t
import pandas as pd
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName


@model(
    "db.py_sqlmesh",
    kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds"),
    columns={"ds": "date", "n": "int"},
)
def execute(context: ExecutionContext, start, end, execution_time, **kwargs: t.Any) -> pd.DataFrame:
    return pd.DataFrame({"ds": [start], "n": [1]})
'''


def test_sqlmesh_style_python_models_load_and_resolve(tmp_path: Path) -> None:
    [model] = load_python_models(_write(tmp_path, SQLMESH_SOURCE, name="sm.py"))
    assert (model.name, model.kind.name, model.kind.time_column) == \
        ("db.py_sqlmesh", KindName.INCREMENTAL_BY_TIME_RANGE, "ds")
    assert resolve_python_model(model)(None, "2024-01-01", None, None)["n"][0] == 1


KIND_CLASSES_SOURCE = '''
import pandas as pd
from sqlmesh import model
from sqlmesh.core.model import FullKind, IncrementalByTimeRangeKind, SCDType2ByColumnKind
from sqlmesh.core.model.kind import (IncrementalByUniqueKeyKind, IncrementalUnmanagedKind, ModelKindName,
                                     SCDType2ByTimeKind, TimeColumn, ViewKind)

KINDS = {
    "time": IncrementalByTimeRangeKind(time_column=TimeColumn("ds", format="%Y%m%d"), batch_size=2),
    "time2": IncrementalByTimeRangeKind(time_column="ds"),
    "key": IncrementalByUniqueKeyKind(unique_key=["Id"]),
    "scd": SCDType2ByTimeKind(unique_key="id", updated_at_name="ts"),
    "scdc": SCDType2ByColumnKind(unique_key=["id"], columns=["v"]),
    "unmanaged": IncrementalUnmanagedKind(insert_overwrite=True),
    "full": FullKind(),
    "named": dict(name=ModelKindName.FULL),
}

for suffix, kind in KINDS.items():
    @model(f"db.k_{suffix}", kind=kind, columns={"id": "int"})
    def execute(context, start, end, execution_time, **kwargs):
        return pd.DataFrame({"id": [1]})
    globals()[f"execute_{suffix}"] = execute
'''


def test_kinds_given_as_sqlmesh_kind_classes(tmp_path: Path) -> None:
    models = {m.name: m.kind for m in load_python_models(_write(tmp_path, KIND_CLASSES_SOURCE, name="k.py"))}
    time = models["db.k_time"]
    assert (time.name, time.time_column, time.time_column_format, time.batch_size) == \
        (KindName.INCREMENTAL_BY_TIME_RANGE, "ds", "%Y%m%d", 2)
    assert models["db.k_time2"].time_column == "ds"
    assert (models["db.k_key"].name, models["db.k_key"].unique_key) == (KindName.INCREMENTAL_BY_UNIQUE_KEY, ("id",))
    assert (models["db.k_scd"].name, models["db.k_scd"].updated_at_name) == (KindName.SCD_TYPE_2_BY_TIME, "ts")
    assert (models["db.k_scdc"].name, models["db.k_scdc"].scd_columns) == (KindName.SCD_TYPE_2_BY_COLUMN, ("v",))
    assert models["db.k_unmanaged"].insert_overwrite is True
    assert models["db.k_full"].name is models["db.k_named"].name is KindName.FULL


KIND_PROJECT = {
    "config.yaml": "gateways:\n  local:\n    connection:\n      type: spark\n      master: local[2]\n"
                   "    state_connection:\n      type: sqlite\n      database: .meshbot/state.db\n"
                   "default_gateway: local\nmodel_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
                   "variables:\n  factor: 10\n",
    "models/src.sql": "MODEL (name db.src, kind FULL);\nSELECT 1 AS id, 'a' AS v UNION ALL SELECT 2 AS id, 'b' AS v\n",
    "models/daily.py": '''import typing as t
import pandas as pd
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model import IncrementalByTimeRangeKind
from sqlmesh.core.model.kind import TimeColumn


@model("db.daily", kind=IncrementalByTimeRangeKind(time_column=TimeColumn(column="ds", format="%Y-%m-%d")),
       columns={"ds": "date", "n": "int", "f": "int"}, depends_on=["db.src"])
def execute(context: ExecutionContext, start, end, execution_time, **kwargs: t.Any) -> pd.DataFrame:
    rows = context.fetchdf(f"SELECT COUNT(*) AS n FROM {context.resolve_table('db.src')}", quote_identifiers=True)
    return pd.DataFrame({"ds": [start.date()], "n": [int(rows["n"][0])], "f": [context.var("factor")]})
''',
    "models/keyed.py": '''import pandas as pd
from sqlmesh import model
from sqlmesh.core.model.kind import IncrementalByUniqueKeyKind


@model("db.keyed", kind=IncrementalByUniqueKeyKind(unique_key=["id"]), columns={"id": "int", "v": "text"})
def execute(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"id": [1, 2], "v": [str(start.date()), "x"]})
''',
    "models/full.py": '''import pandas as pd
from sqlmesh import model
from sqlmesh.core.model import FullKind


@model("db.full_py", kind=FullKind(), columns={"id": "int"})
def execute(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"id": [len(context.fetchdf("SELECT 1 AS a UNION ALL SELECT 2"))]})
''',
}


def test_kind_classes_and_context_fetchdf_run_as_in_sqlmesh(tmp_path: Path, clean_catalog) -> None:
    from bot.context import Context
    from bot.plan.definition import PlanOptions
    from project_files import write_files

    context = Context(write_files(tmp_path / "p", KIND_PROJECT))
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-03 01:00:00")))
        rows = {table: [tuple(r.values()) for r in context.fetchdf(f"SELECT * FROM {table} ORDER BY 1")]
                for table in ("db.daily", "db.keyed", "db.full_py")}
    finally:
        context.close()
    # SQLMesh 0.236.4 on DuckDB, same project, plan at 2024-01-03 01:00 UTC (one batch from 2024-01-01)
    assert [(str(ds), n, f) for ds, n, f in rows["db.daily"]] == [("2024-01-01", 2, 10)]
    assert rows["db.keyed"] == [(1, "2024-01-01"), (2, "x")]
    assert rows["db.full_py"] == [(2,)]
