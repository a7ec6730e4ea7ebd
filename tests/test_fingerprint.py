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


def test_the_hash_cache_gives_the_same_fingerprints_and_hashes_only_what_its_key_does_not_match(
        tmp_path, monkeypatch, capsys):
    """A plan keeps each SQL model's own hashes in .meshbot/cache/hashes.json, keyed by its file's
    content key, its seed's content hash and its rendered query: the next plan hashes only models
    whose key changed, and a damaged file is rebuilt."""
    import bot.fingerprint as fingerprint
    from bot.fingerprint import HASH_CACHE_FILE, HashCache

    orders, totals = make("db.orders", BASE), make("db.totals", "SELECT SUM(amount) AS s FROM db.orders")
    models = {"db.orders": orders, "db.totals": totals}
    order, rendered = ["db.orders", "db.totals"], {name: canonical(m) for name, m in models.items()}
    sources = {"db.orders": "digest-1", "db.totals": "digest-2"}
    hashed: list[str] = []
    real_data_hash = fingerprint.data_hash
    monkeypatch.setattr(fingerprint, "data_hash", lambda model, sql: hashed.append(model.name) or
                        real_data_hash(model, sql))

    def plan(sources, rendered, models=models):
        cache = HashCache(tmp_path, sources)
        result = fingerprint_models(models, order, rendered, cache=cache)
        cache.save()
        return result

    other = {**rendered, "db.totals": rendered["db.totals"] + " WHERE 1 = 1"}
    seeded = {**models, "db.orders": make("db.orders", BASE, seed_content_hash="abc")}
    expected, expected_other = fingerprint_models(models, order, rendered), fingerprint_models(models, order, other)
    expected_seeded = fingerprint_models(seeded, order, other)

    def hashes_in(sources, rendered, models=models):
        hashed.clear()
        return plan(sources, rendered, models), list(hashed)

    assert hashes_in(sources, rendered) == (expected, ["db.orders", "db.totals"])
    assert hashes_in(sources, rendered) == (expected, [])
    sources = {**sources, "db.orders": "digest-1b"}
    assert hashes_in(sources, rendered) == (expected, ["db.orders"])
    assert hashes_in(sources, other) == (expected_other, ["db.totals"])
    assert hashes_in(sources, other, seeded) == (expected_seeded, ["db.orders"])
    # no content key (a Python model, say): always hashed
    assert hashes_in({"db.orders": "digest-1b"}, other, seeded) == (expected_seeded, ["db.totals"])

    (tmp_path / HASH_CACHE_FILE).write_text('{"stamp": "x", "entries": {"db.orders": [1, 2]}}')
    assert hashes_in(sources, rendered) == (expected, ["db.orders", "db.totals"])
    assert "ignoring the hash cache" in capsys.readouterr().err
