"""Type mapping from any sqlglot dialect, and from Spark schemas, to Spark DDL."""

from __future__ import annotations

import pytest

from bot.errors import EngineError
from bot.spark.types import columns_ddl, data_type_sql, to_spark_type


@pytest.mark.parametrize(("text", "dialect", "spark"), [
    ("INT", "spark", "INT"), ("BIGINT", "duckdb", "BIGINT"), ("TEXT", "postgres", "STRING"),
    ("VARCHAR", "duckdb", "STRING"), ("DECIMAL(10,2)", "spark", "DECIMAL(10, 2)"),
    ("DATE", "spark", "DATE"), ("TIMESTAMP", "spark", "TIMESTAMP"), ("DOUBLE", "spark", "DOUBLE"),
    ("BOOLEAN", "postgres", "BOOLEAN"), ("int64", "bigquery", "BIGINT"), ("ARRAY<INT>", "spark", "ARRAY<INT>"),
])
def test_to_spark_type(text, dialect, spark):
    assert to_spark_type(text, dialect=dialect) == spark


def test_unknown_type_is_a_clear_error():
    with pytest.raises(EngineError, match=r"unknown column type `NOT A TYPE\(`"):
        to_spark_type("NOT A TYPE(")


def test_columns_ddl_quotes_names_and_schema_types_nest():
    from pyspark.sql import types as T

    assert columns_ddl([("order id", "text"), ("n", "int")]) == "`order id` STRING, `n` INT"
    nested = T.StructType([T.StructField("a b", T.ArrayType(T.LongType())), T.StructField("m", T.NullType())])
    assert data_type_sql(nested) == "STRUCT<`a b`: ARRAY<BIGINT>, `m`: STRING>"
