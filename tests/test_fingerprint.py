"""Fingerprints: comment/whitespace edits are invisible, data vs metadata changes, Merkle parents."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bot.fingerprint import data_hash, fingerprint_models, metadata_hash
from bot.project.model import AuditRef, Kind, KindName, Model
from bot.project.render import normalized_query_sql


def make(name: str, sql: str, **fields) -> Model:
    query = sqlglot.parse_one(sql, read="spark")
    deps = frozenset(f"{t.db}.{t.name}" for t in query.find_all(exp.Table))
    return Model(name=name, kind=fields.pop("kind", Kind(KindName.FULL)), dialect="spark",
                 path=Path(f"models/{name}.sql"), query=query, query_text=sql, depends_on=deps,
                 **fields)


def canonical(model: Model) -> str:
    return normalized_query_sql(model)


def fingerprints(*models: Model):
    by_name = {m.name: m for m in models}
    return fingerprint_models(by_name, [m.name for m in models], {m.name: canonical(m) for m in models})


BASE = "SELECT id, amount FROM raw.orders"


def test_comment_and_whitespace_edits_keep_the_fingerprint():
    plain = make("db.orders", BASE)
    edited = make("db.orders", "-- orders\nSELECT   id,\n  amount /* cents */\nFROM raw.orders")
    assert fingerprints(plain)["db.orders"] == fingerprints(edited)["db.orders"]


def test_new_where_changes_the_data_hash_and_version():
    before = fingerprints(make("db.orders", BASE))["db.orders"]
    after = fingerprints(make("db.orders", BASE + " WHERE amount > 0"))["db.orders"]
    assert before.data_hash != after.data_hash
    assert before.data_version != after.data_version


@pytest.mark.parametrize("field, value", [
    ("owner", "alice"), ("description", "Orders"), ("cron", "@hourly"), ("start", "2023-01-01"),
    ("tags", ("finance",)), ("grains", ("id",)), ("audits", (AuditRef("not_null", (("columns", "(id)"),)),)),
    ("column_descriptions", (("id", "key"),)), ("physical_properties", (("a", "'b'"),)),
])
def test_metadata_fields_change_only_the_metadata_hash(field, value):
    rendered = canonical(make("db.orders", BASE))
    before, after = make("db.orders", BASE), make("db.orders", BASE, **{field: value})
    assert data_hash(before, rendered) == data_hash(after, rendered)
    assert metadata_hash(before) != metadata_hash(after)


@pytest.mark.parametrize("field, value", [
    ("kind", Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")),
    ("partitioned_by", ("ds",)), ("columns", (("id", "INT"),)),
    ("pre_statements", (sqlglot.parse_one("SET x = 1"),)), ("seed_content_hash", "abc"),
])
def test_data_fields_change_the_data_hash(field, value):
    rendered = canonical(make("db.orders", BASE))
    assert data_hash(make("db.orders", BASE), rendered) != data_hash(make("db.orders", BASE, **{field: value}), rendered)


def test_kind_batch_size_is_metadata():
    kind = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    a, b = make("db.o", BASE, kind=kind), make("db.o", BASE, kind=Kind(
        KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", batch_size=7))
    assert data_hash(a, BASE) == data_hash(b, BASE) and metadata_hash(a) != metadata_hash(b)


def test_parent_changes_reach_grandchildren():
    child_sql, grandchild_sql = "SELECT id FROM db.orders", "SELECT id FROM db.ids"
    before = fingerprints(make("db.orders", BASE), make("db.ids", child_sql), make("db.top", grandchild_sql))
    after = fingerprints(make("db.orders", BASE + " WHERE id > 1"), make("db.ids", child_sql),
                         make("db.top", grandchild_sql))
    for name in ("db.ids", "db.top"):
        assert before[name].data_hash == after[name].data_hash
        assert before[name].parent_data_hash != after[name].parent_data_hash
        assert before[name].data_version != after[name].data_version


def test_parent_owner_change_changes_only_parent_metadata_hash_of_child():
    child = make("db.ids", "SELECT id FROM db.orders")
    before = fingerprints(make("db.orders", BASE), child)["db.ids"]
    after = fingerprints(make("db.orders", BASE, owner="bob"), child)["db.ids"]
    assert before.parent_data_hash == after.parent_data_hash
    assert before.parent_metadata_hash != after.parent_metadata_hash
    assert before.data_version == after.data_version and before.identifier != after.identifier


def test_fingerprints_are_stable_golden_values():
    """Changing any hash input silently would re-version every table: it needs a state migration."""
    fp = fingerprints(make("db.orders", BASE))["db.orders"]
    assert (fp.data_hash, fp.metadata_hash, fp.parent_data_hash) == ("139476603", "3976946563", "0")
    assert fp.data_version == "3747183027"


def test_order_with_child_before_parent_is_refused():
    with pytest.raises(ValueError, match="before its parents"):
        by_name = {"db.orders": make("db.orders", BASE), "db.ids": make("db.ids", "SELECT id FROM db.orders")}
        fingerprint_models(by_name, ["db.ids", "db.orders"], {})
