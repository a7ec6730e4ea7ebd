"""A parse-cache entry reads back as the model that was parsed: every field, whether it holds its
default (left out of the entry) or any other value."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.project.cache import KeyedEntries, dumps, entries_from_data
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


def _keyed(root: Path, header: str = "h1") -> KeyedEntries:
    return KeyedEntries(root, Path("cache") / "x.json", what="test cache", header=("stamp", header),
                        entry=lambda entry: type(entry) is list and all(type(part) is str for part in entry))


def test_keyed_entries_write_a_few_changes_apart_and_read_them_back(tmp_path):
    whole, changes = tmp_path / "cache" / "x.json", tmp_path / "cache" / "x.changes.json"
    entries = {f"m{i}": [f"key{i}", f"sql{i}"] for i in range(32)}
    _keyed(tmp_path).save(entries)
    written = whole.read_bytes()
    assert _keyed(tmp_path).entries == entries and not changes.exists()

    edited = {**entries, "m7": ["key7b", "sql7b"]}   # one entry of 32: only the changes file is written
    _keyed(tmp_path).save(edited)
    assert whole.read_bytes() == written and json.loads(changes.read_text())["entries"] == {"m7": ["key7b", "sql7b"]}
    assert _keyed(tmp_path).entries == edited

    _keyed(tmp_path).save(entries)   # back as models.json has it: no changes left
    assert whole.read_bytes() == written and not changes.exists() and _keyed(tmp_path).entries == entries

    _keyed(tmp_path).save(edited)
    assert _keyed(tmp_path, header="h2").entries == {}   # another code stamp: neither file is used
    fewer = {name: entry for name, entry in edited.items() if name != "m3"}   # a dropped entry: written whole
    _keyed(tmp_path).save(fewer)
    assert not changes.exists() and json.loads(whole.read_text())["entries"] == fewer
    many = {name: [entry[0] + "c", entry[1]] for name, entry in fewer.items()}   # more than a sixteenth changed
    _keyed(tmp_path).save(many)
    assert not changes.exists() and _keyed(tmp_path).entries == many


def test_keyed_entries_ignore_a_changes_file_of_the_wrong_shape(tmp_path, capsys):
    entries = {f"m{i}": [f"key{i}"] for i in range(32)}
    _keyed(tmp_path).save(entries)
    (tmp_path / "cache" / "x.changes.json").write_text('{"stamp": "h1", "entries": {"m1": [1]}}')
    assert _keyed(tmp_path).entries == entries
    assert "ignoring the test cache cache/x.changes.json (not in the shape meshbot writes)" in capsys.readouterr().err
