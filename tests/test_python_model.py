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
