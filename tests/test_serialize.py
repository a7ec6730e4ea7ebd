"""Model ⇄ dict roundtrip: JSON-safe, every field kept, queries re-parsed with macros intact."""

from __future__ import annotations

import json
from sqlglot import exp

from bot.project.example import write_example
from bot.project.loader import load_project
from bot.project.serialize import model_from_dict, model_to_dict

MODEL = """MODEL (
  name db.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column (ds, '%Y-%m-%d'), batch_size 3, lookback 1),
  dialect duckdb,
  grains (id, ds),
  tags [a],
  columns (id INT, ds TEXT),
  column_descriptions (id = 'The id'),
  audits (not_null(columns := (id)), accepted_range(column := id, min_v := 0, blocking := false)),
  partitioned_by ds,
  physical_properties (format = 'parquet'),
  owner ana,
  depends_on [ext.x],
);
@DEF(threshold, 5);
SELECT id, ds, @IF(@threshold > 1, 'many', 'few') AS label, list_transform([1, 2], x -> x + 1) AS xs
FROM raw.events WHERE ds BETWEEN @start_ds AND @end_ds;
INSERT INTO db.log SELECT COUNT(*) AS n FROM raw.events;
"""


def roundtrip(model):
    data = model_to_dict(model)
    return data, model_from_dict(json.loads(json.dumps(data)))


def test_roundtrip_keeps_every_field(tmp_path):
    root = tmp_path / "p"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (root / "models" / "events.sql").write_text(MODEL)
    model = load_project(root, use_cache=False).models["db.events"]
    data, back = roundtrip(model)
    assert model_to_dict(back) == data
    assert back.query.sql("duckdb") == model.query.sql("duckdb")
    assert [s.sql() for s in back.pre_statements] == ["MESHBOT_MACRO_DEF(threshold, 5)"]
    assert {p.name for p in back.query.find_all(exp.Parameter)} == {"threshold", "start_ds", "end_ds"}
    assert back.kind == model.kind and back.audits == model.audits
    assert back.depends_on == {"raw.events", "ext.x"} and back.path == model.path
    assert data["query"].startswith("SELECT id, ds, MESHBOT_MACRO_IF(@threshold > 1")


def test_roundtrip_of_the_example_project(tmp_path):
    write_example(tmp_path / "shop")
    for model in load_project(tmp_path / "shop", use_cache=False).models.values():
        data, back = roundtrip(model)
        assert model_to_dict(back) == data, model.name
        assert (back.query.sql() if back.query else None) == (model.query.sql() if model.query else None)
        assert back.seed_abs_path == model.seed_abs_path and back.seed_content_hash == model.seed_content_hash


def test_equal_kind_dicts_share_one_kind_and_only_equal_ones_do():
    from bot.project.model import Kind, KindName
    from bot.project.serialize import _kind_from_dict, _kind_to_dict

    stored = _kind_to_dict(Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", lookback=1))
    first = _kind_from_dict(dict(stored))
    assert _kind_from_dict(dict(stored)) is first and first == Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE,
                                                                      time_column="ds", lookback=1)
    as_bool = _kind_from_dict({**stored, "lookback": True})   # equal to 1 in Python, not the same value
    assert as_bool is not first and as_bool.lookback is True
    keyed = _kind_from_dict({**stored, "unique_key": ["id"]})
    assert keyed.unique_key == ("id",) and first.unique_key == ()
