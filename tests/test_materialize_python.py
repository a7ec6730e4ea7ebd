"""Python models: pandas and Spark DataFrames written with their kind's semantics."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate
from bot.spark.python_eval import to_spark_df

DAY = 86_400_000
JAN1 = 1_704_067_200_000


@pytest.fixture
def engine(clean_catalog):
    engine = SparkEngine(clean_catalog)
    engine.db = f"py_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([engine.db])
    return engine


def test_pandas_frame_into_incremental_by_time_with_declared_columns(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    table = f"{engine.db}.py_model__1"
    columns = [("ds", "DATE"), ("amount", "DOUBLE"), ("note", "TEXT")]
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=columns)
    frame = pd.DataFrame({"note": ["a", None, "c"], "ds": ["2024-01-01", "2024-01-01", "2024-01-02"],
                          "amount": [1.5, float("nan"), 3.0]})
    evaluate(engine, kind=kind, table=table, query=frame, start=JAN1, end=JAN1 + DAY,
             execution_time=JAN1 + DAY, first_run=True)
    rows = engine.fetch(f"SELECT CAST(ds AS STRING) AS ds, amount, note FROM {table} ORDER BY amount NULLS FIRST")
    assert rows == [{"ds": "2024-01-01", "amount": None, "note": None},
                    {"ds": "2024-01-01", "amount": 1.5, "note": "a"}]


def test_spark_frame_into_unique_key_and_bad_return_type(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_UNIQUE_KEY, unique_key=("id",))
    table = f"{engine.db}.spark_model__1"
    spark = engine.session
    create_physical(engine, kind=kind, table=table, query_sql="SELECT 1 AS id, 'a' AS v", columns=None)
    evaluate(engine, kind=kind, table=table, query=spark.sql("SELECT 1 AS id, 'a' AS v"), start=0, end=DAY,
             execution_time=DAY, first_run=True)
    evaluate(engine, kind=kind, table=table, query=spark.createDataFrame([(1, "b"), (2, "c")], "id INT, v STRING"),
             start=0, end=DAY, execution_time=DAY, first_run=False)
    assert engine.fetch(f"SELECT * FROM {table} ORDER BY id") == [{"id": 1, "v": "b"}, {"id": 2, "v": "c"}]
    with pytest.raises(EngineError, match="must return a Spark or pandas DataFrame, not dict"):
        to_spark_df(spark, {"id": 1})


@pytest.mark.parametrize("column, values, shown", [
    ("amount", ["1.5", "twelve"], "'twelve'"),           # text in a DOUBLE column
    ("id", [1, 99_999_999_999], "'99999999999'"),         # a pandas int64 beyond INT
])
def test_a_returned_value_that_does_not_fit_its_declared_column_fails_and_writes_nothing(engine, column, values,
                                                                                         shown):
    kind = Kind(name=KindName.FULL)
    table = f"{engine.db}.typed__1"
    columns = [("id", "INT"), ("amount", "DOUBLE")]
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=columns)
    evaluate(engine, kind=kind, table=table, query=pd.DataFrame({"id": [7], "amount": [7.5]}), start=0, end=DAY,
             execution_time=DAY, first_run=True)
    frame = pd.DataFrame({"id": [1, 2], "amount": [1.0, 2.0]}).assign(**{column: values})
    with pytest.raises(EngineError) as error:
        evaluate(engine, kind=kind, table=table, query=frame, start=0, end=DAY, execution_time=DAY, first_run=False)
    kind_of = dict(columns)[column]
    assert f"column `{column}` is {kind_of}, and the value {shown} does not fit it" in str(error.value)
    assert "USER_RAISED_EXCEPTION" not in str(error.value)
    assert engine.fetch(f"SELECT * FROM {table}") == [{"id": 7, "amount": 7.5}]


def test_a_number_with_a_fraction_is_rounded_into_an_integer_column_as_duckdb_casts_it(engine):
    # SQLMesh 0.236.4 on DuckDB, declared INT columns: 12.7 -> 13, -2.5 (DOUBLE) -> -2, 2.5 (DECIMAL) -> 3
    kind = Kind(name=KindName.FULL)
    table = f"{engine.db}.rounded__1"
    columns = [("x", "INT"), ("y", "INT"), ("z", "BIGINT")]
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=columns)
    query = engine.session.sql("SELECT 12.7 AS x, CAST(-2.5 AS DOUBLE) AS y, 2.5 AS z")
    evaluate(engine, kind=kind, table=table, query=query, start=0, end=DAY, execution_time=DAY, first_run=True)
    assert engine.fetch(f"SELECT * FROM {table}") == [{"x": 13, "y": -2, "z": 3}]
