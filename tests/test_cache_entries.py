"""A parse-cache entry reads back as the model that was parsed: every field, whether it holds its
default (left out of the entry) or any other value."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.project.cache import dumps, entries_from_data
from bot.project.model import AuditRef, Kind, KindName, Model, OnDestructiveChange
from bot.project.model_parser import MacroRef, ParsedModel
from bot.project.sqltext import parse_sql, to_sql

_AST_FIELDS = ("query", "pre_statements", "post_statements")


def _every_field_set() -> Model:
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", time_column_format="%Y%m%d",
                batch_size=7, lookback=2, forward_only=True, disable_restatement=True,
                on_destructive_change=OnDestructiveChange.WARN, unique_key=("id",), insert_overwrite=True)
    return Model(
        name="shop.orders", kind=kind, dialect="duckdb", path=Path("/p/models/orders.sql"),
        query=parse_sql("SELECT id, ds FROM shop.raw", "duckdb")[0], query_text="SELECT id, ds FROM shop.raw",
        pre_statements=tuple(parse_sql("SET x = 1", "duckdb")), post_statements=tuple(parse_sql("SET y = 2", "duckdb")),
        cron="@hourly", start="2024-01-01", end="2024-02-01", grains=("id",),
        audits=(AuditRef(name="not_null", args=(("columns", "(id)"),), blocking=False),),
        owner="ana", tags=("t1", "t2"), description="orders", column_descriptions=(("id", "the id"),),
        columns=(("id", "int"), ("ds", "string")), partitioned_by=("ds",),
        physical_properties=(("a", "'b'"),), session_properties=(("spark.x", "'1'"),),
        depends_on_explicit=("shop.raw",), depends_on=frozenset({"shop.raw"}), enabled=False,
        python_source="def f(): ...", python_entrypoint="f", seed_content_hash="abc",
        seed_abs_path=Path("/p/seeds/x.csv"), jinja_query="SELECT {{ 1 }}", jinja_line=4,
        jinja_macros=(("m", "{% macro m() %}1{% endmacro %}"),), line=3, blueprint_variables=(("v", "1"),))


@pytest.mark.parametrize("model", [
    Model(name="shop.v", kind=Kind(), dialect="spark", path=Path("/p/models/v.sql")),   # every default
    _every_field_set(),
], ids=["defaults", "every-field-set"])
def test_a_cached_entry_reads_back_every_field(model):
    parsed = ParsedModel(model=model, macro_refs=(MacroRef("x", "var", 2),), warnings=(("unused", 1),),
                         cacheable=True)
    (read,) = entries_from_data(json.loads(dumps((parsed,))))
    assert (read.macro_refs, read.warnings, read.cacheable) == (parsed.macro_refs, parsed.warnings, True)
    for field in dataclasses.fields(Model):
        got, want = getattr(read.model, field.name), getattr(model, field.name)
        if field.name in _AST_FIELDS:
            got = [to_sql(e, model.dialect) for e in (got if isinstance(got, tuple) else (got,)) if e is not None]
            want = [to_sql(e, model.dialect) for e in (want if isinstance(want, tuple) else (want,)) if e is not None]
        assert got == want and type(got) is type(want), field.name
