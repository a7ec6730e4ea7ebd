"""Loading projects: the example shop, MODEL header properties, macros, errors with file/line, the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlglot import exp

from bot.errors import ConfigError
from bot.project.cache import CACHE_FILE, CHANGES_FILE
from bot.project.example import write_example
from bot.project.loader import load_project, parse_sql, preprocess_macros, to_sql
from bot.project.model import KindName, OnDestructiveChange
from bot.project.serialize import model_to_dict

CONFIG = "model_defaults:\n  dialect: {dialect}\n  start: '2024-01-01'\n"


def make_project(root: Path, models: dict[str, str], *, dialect: str = "spark",
                 extra: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(CONFIG.format(dialect=dialect))
    for name, text in {**{f"models/{k}": v for k, v in models.items()}, **(extra or {})}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def load(root: Path, **kwargs):
    return load_project(root, use_cache=False, **kwargs)


@pytest.fixture
def shop(tmp_path) -> Path:
    write_example(tmp_path / "shop")
    return tmp_path / "shop"


def test_example_project_loads(shop):
    project = load(shop)
    assert list(project.models) == ["shop.raw_customers", "shop.customers", "shop.raw_orders",
                                    "shop.orders", "shop.customer_revenue", "shop.top_customers"]
    models = project.models
    kinds = {name: m.kind.name for name, m in models.items()}
    assert kinds["shop.raw_orders"] is KindName.SEED
    assert kinds["shop.orders"] is KindName.INCREMENTAL_BY_TIME_RANGE
    assert kinds["shop.customers"] is KindName.INCREMENTAL_BY_UNIQUE_KEY
    assert kinds["shop.customer_revenue"] is KindName.FULL
    assert kinds["shop.top_customers"] is KindName.VIEW
    assert models["shop.orders"].kind.time_column == "ds"
    assert models["shop.customers"].kind.unique_key == ("customer_id",)
    assert models["shop.customer_revenue"].depends_on == {"shop.customers", "shop.orders"}
    assert models["shop.orders"].depends_on == {"shop.raw_orders"}
    assert models["shop.customer_revenue"].grains == ("customer_id",)
    assert [a.name for a in models["shop.orders"].audits] == ["not_null", "assert_positive_amount"]
    assert models["shop.orders"].audits[0].args == (("columns", "(order_id, customer_id, ds)"),)
    assert all(m.start == "2024-01-01" and m.end == "2024-01-07" for m in models.values())
    seed = models["shop.raw_orders"]
    assert seed.seed_abs_path == (shop / "seeds" / "raw_orders.csv").resolve()
    assert len(seed.seed_content_hash) == 64 and seed.query is None
    assert seed.columns[3] == ("amount", "DOUBLE")
    assert set(project.audits) == {"assert_positive_amount"}
    assert project.audits["assert_positive_amount"].blocking is True
    assert [p.name for p in project.test_files] == ["test_customer_revenue.yaml"]
    assert project.dag.parents["shop.top_customers"] == ("shop.customer_revenue",)


def test_example_query_keeps_macro_variables(shop):
    query = load(shop).models["shop.orders"].query
    assert {p.name for p in query.find_all(exp.Parameter)} == {"start_ds", "end_ds"}
    assert "WHERE ds BETWEEN @start_ds AND @end_ds" in load(shop).models["shop.orders"].query_text


def test_the_example_keeps_meshbot_s_own_folder_out_of_git(tmp_path):
    write_example(tmp_path / "shop")
    assert (tmp_path / "shop" / ".gitignore").read_text().splitlines() == [".meshbot/"]


def test_write_example_refuses_non_empty_dir(tmp_path):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match="non-empty"):
        write_example(tmp_path)


HEADER_MODEL = """
-- leading comment
MODEL (
  name Sales.Events,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column (event_date, '%Y%m%d'),
    batch_size 7,
    lookback 2,
    forward_only true,
    on_destructive_change warn,
  ),
  cron '@hourly',
  owner ana,
  grains (event_id, event_date),
  tags (a, 'b'),
  columns (event_id INT, payload VARCHAR, event_date TEXT),
  column_descriptions (event_id = 'The id'),
  partitioned_by event_date,
  physical_properties (format = 'parquet'),
  depends_on [ext.lookup],
  description 'All events',
  audits (not_null_non_blocking(columns := (event_id)), number_of_rows(threshold := 10, blocking := false)),
);
SELECT event_id, payload, event_date FROM raw.events WHERE event_date BETWEEN @start_ds AND @end_ds
"""


def test_header_properties(tmp_path):
    model = load(make_project(tmp_path, {"events.sql": HEADER_MODEL})).models["sales.events"]
    kind = model.kind
    assert (kind.time_column, kind.time_column_format, kind.batch_size, kind.lookback) == \
        ("event_date", "%Y%m%d", 7, 2)
    assert kind.forward_only and kind.on_destructive_change is OnDestructiveChange.WARN
    assert (model.cron, model.owner, model.description) == ("@hourly", "ana", "All events")
    assert model.grains == ("event_id", "event_date")
    assert model.tags == ("a", "b")
    assert model.columns == (("event_id", "INT"), ("payload", "STRING"), ("event_date", "STRING"))
    assert model.column_descriptions == (("event_id", "The id"),)
    assert model.partitioned_by == ("event_date",)
    assert model.physical_properties == (("format", "parquet"),)
    assert model.depends_on_explicit == ("ext.lookup",)
    assert model.depends_on == {"ext.lookup", "raw.events"}
    assert [(a.name, a.args, a.blocking) for a in model.audits] == [
        ("not_null", (("columns", "(event_id)"),), False),
        ("number_of_rows", (("threshold", "10"),), False)]
    assert model.line == 3 and model.start == "2024-01-01"


def test_other_kinds_and_defaults(tmp_path):
    root = make_project(tmp_path, {
        "a.sql": "MODEL (name a);\nSELECT 1 AS x",
        "b.sql": "MODEL (name db.b, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key (k1, k2)), grain [k1, k2]);\n"
                 "SELECT 1 AS k1, 2 AS k2",
        "c.sql": "MODEL (name db.c, kind SCD_TYPE_2_BY_COLUMN (unique_key id, columns [status]));\n"
                 "SELECT 1 AS id, 'x' AS status",
        "d.sql": "MODEL (name db.d, kind VIEW (materialized true), dialect duckdb, tags [x]);\n"
                 "SELECT @start_ds AS s FROM db.b",
        "e.sql": "MODEL (name db.e, enabled false);\nSELECT 1 AS x",
    })
    models = load(root).models
    assert set(models) == {"default.a", "db.b", "db.c", "db.d"}
    assert models["default.a"].kind.name is KindName.VIEW and models["default.a"].cron == "@daily"
    assert models["db.b"].kind.unique_key == ("k1", "k2") and models["db.b"].grains == ("k1", "k2")
    assert models["db.c"].kind.scd_columns == ("status",)
    assert models["db.d"].kind.materialized and models["db.d"].dialect == "duckdb"
    assert isinstance(models["db.d"].query.selects[0].this, exp.Parameter)


def test_default_kind_from_model_defaults(tmp_path):
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT 1 AS x"})
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n  kind: FULL\n  cron: '@hourly'\n")
    model = load(root).models["db.a"]
    assert model.kind.name is KindName.FULL and model.cron == "@hourly"


def test_macros_pre_and_post_statements(tmp_path):
    text = """MODEL (name db.m);
@DEF(threshold, 10);
SET spark.sql.ansi.enabled = true;
WITH recent AS (SELECT * FROM db.src WHERE amount > @threshold)
SELECT id, @IF(@threshold > 5, 'big', 'small') AS size, @EACH([1, 2], x -> x + 1) AS xs
FROM recent;
INSERT INTO db.log SELECT * FROM db.audit_src;
"""
    model = load(make_project(tmp_path, {"m.sql": text})).models["db.m"]
    assert [s.sql() for s in model.pre_statements][0] == "MESHBOT_MACRO_DEF(threshold, 10)"
    assert len(model.pre_statements) == 2 and len(model.post_statements) == 1
    assert model.depends_on == {"db.src", "db.audit_src"}   # CTE and INSERT target excluded
    calls = {f.name for f in model.query.find_all(exp.Anonymous)}
    assert {"MESHBOT_MACRO_IF", "MESHBOT_MACRO_EACH"} <= calls


def test_preprocess_macros_skips_strings_and_comments():
    sql = "SELECT @my_macro(a), '@not(x)', \"@nope(\" -- @nada(\n/* @no( */ @Each([1], x -> x)"
    assert preprocess_macros(sql) == ("SELECT MESHBOT_MACRO_MY_MACRO(a), '@not(x)', \"@nope(\" -- @nada(\n"
                                      "/* @no( */ MESHBOT_MACRO_EACH([1], x -> x)")


def test_duckdb_at_is_a_macro_variable_not_abs():
    (query,) = parse_sql("SELECT @start_ds AS d FROM t", "duckdb")
    assert isinstance(query.selects[0].this, exp.Parameter)


def test_macro_syntax_leaves_sqlglot_as_it_was():
    """`@x` handling swaps entries of sqlglot's dispatch tables only while meshbot parses or prints."""
    import sqlglot

    (query,) = parse_sql("SELECT @x AS d FROM t", "duckdb")
    assert to_sql(query, "duckdb") == to_sql(query, "spark") == "SELECT @x AS d FROM t"
    assert isinstance(sqlglot.parse_one("SELECT @x", read="duckdb").selects[0], exp.Abs)
    assert sqlglot.parse_one("SELECT @x", read="spark").sql("spark") == "SELECT ${x}"


def test_compiled_sqlglot_is_installed_and_used():
    """The `sqlglot[c]` dependency: sqlglotc (same version) makes cold plans ~3x faster; losing it is silent."""
    from importlib.metadata import version

    import sqlglot
    from bot.project.cache import COMPILED_SQLGLOT

    assert version("sqlglotc") == sqlglot.__version__
    assert COMPILED_SQLGLOT


def test_comment_and_whitespace_edits_keep_the_query(tmp_path):
    first = "MODEL (name db.q);\nSELECT a, b FROM db.t WHERE a > 1"
    second = ("-- header comment\nMODEL (\n  name db.q -- the name\n);\n\n/* explain */\nSELECT\n  a, -- first\n"
              "  b\nFROM   db.t\nWHERE a > 1 /* filter */\n")
    one = load(make_project(tmp_path / "one", {"q.sql": first})).models["db.q"]
    two = load(make_project(tmp_path / "two", {"q.sql": second})).models["db.q"]
    assert one.query.sql() == two.query.sql()
    assert "-- first" in two.query_text


def test_external_models(tmp_path):
    yaml_text = "- name: ext.lookup\n  columns:\n    id: int\n    label: varchar\n" \
                "  audits:\n    - name: not_null\n      columns: [id]\n"
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT * FROM ext.lookup"},
                        extra={"external_models.yaml": yaml_text})
    project = load(root)
    ext = project.models["ext.lookup"]
    assert ext.kind.name is KindName.EXTERNAL
    assert ext.columns == (("id", "INT"), ("label", "STRING"))
    assert ext.audits[0].name == "not_null" and ext.audits[0].args == (("columns", "(id)"),)
    assert project.dag.parents["db.a"] == ("ext.lookup",)


def error_of(tmp_path: Path, models: dict[str, str], **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load(make_project(tmp_path, models, **kwargs))
    return str(info.value)


def test_syntax_error_names_file_and_line(tmp_path):
    message = error_of(tmp_path, {"bad.sql": "MODEL (\n  name db.bad\n);\n\nSELECT a\n  FROM t WHERE (b = 1"})
    assert "models/bad.sql:6" in message and "syntax error" in message


def test_unknown_kind_lists_known_kinds(tmp_path):
    message = error_of(tmp_path, {"k.sql": "MODEL (\n  name db.k,\n  kind INCREMENTAL\n);\nSELECT 1"})
    assert "k.sql:3" in message and "INCREMENTAL_BY_TIME_RANGE" in message and "FULL" in message


def test_a_lookback_on_a_kind_that_appends_is_refused_as_in_sqlmesh(tmp_path):
    # SQLMesh 0.236.4: "Invalid field name present in the MODEL block 'kind INCREMENTAL_UNMANAGED' field:
    # 'lookback'"; meshbot recomputed the last intervals of a kind that only appends: their rows twice
    message = error_of(tmp_path, {"u.sql": "MODEL (name db.u,\n kind INCREMENTAL_UNMANAGED (\n  lookback 2));\n"
                                           "SELECT 1 AS x"})
    assert message.endswith("u.sql:3: `lookback` is not a property of kind INCREMENTAL_UNMANAGED (as in SQLMesh); "
                            "it applies to INCREMENTAL_BY_TIME_RANGE, INCREMENTAL_BY_UNIQUE_KEY, CUSTOM"), message


def test_time_range_without_time_column(tmp_path):
    message = error_of(tmp_path, {"t.sql": "MODEL (name db.t,\n kind INCREMENTAL_BY_TIME_RANGE (batch_size 2));\n"
                                           "SELECT 1"})
    assert "t.sql:2" in message and "time_column" in message


def test_unique_key_required(tmp_path):
    message = error_of(tmp_path, {"u.sql": "MODEL (name db.u, kind INCREMENTAL_BY_UNIQUE_KEY);\nSELECT 1"})
    assert "u.sql:1" in message and "unique_key" in message


def test_duplicate_model_names_name_both_files(tmp_path):
    message = error_of(tmp_path, {"one.sql": "MODEL (name db.x);\nSELECT 1 AS a",
                                  "two.sql": "MODEL (name DB.X);\nSELECT 2 AS a"})
    assert "one.sql" in message and "two.sql" in message and "db.x" in message


def test_missing_seed_file(tmp_path):
    message = error_of(tmp_path, {"s.sql": "MODEL (\n  name db.s,\n  kind SEED (path '../seeds/nope.csv')\n);"})
    assert "s.sql:3" in message and "../seeds/nope.csv" in message


def test_invalid_cron(tmp_path):
    message = error_of(tmp_path, {"c.sql": "MODEL (\n  name db.c,\n  cron 'every day'\n);\nSELECT 1"})
    assert "c.sql:3" in message and "every day" in message


def test_unknown_macro_names_file_line_and_macro(tmp_path):
    message = error_of(tmp_path, {"m.sql": "MODEL (name db.m);\nSELECT\n  @no_such_macro(a) AS x\nFROM t"})
    assert "m.sql:3" in message and "@no_such_macro" in message
    message = error_of(tmp_path / "v", {"m.sql": "MODEL (name db.m);\nSELECT @mystery AS x FROM t"})
    assert "m.sql:2" in message and "@mystery" in message


def test_user_macros_and_variables_are_known(tmp_path):
    root = make_project(tmp_path, {"m.sql": "MODEL (name db.m);\nSELECT @add_one(1) AS x, @country AS c"},
                        extra={"macros/util.py": "from bot.project.macros import macro\n\n\n@macro()\n"
                                                 "def add_one(evaluator, value):\n    return value\n"})
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\nvariables:\n  country: DE\n")
    assert "db.m" in load(root).models


def test_malformed_external_models_and_tests_yaml(tmp_path):
    message = error_of(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT 1"},
                       extra={"external_models.yaml": "- name: x\n  columns: {a: int\n"})
    assert "external_models.yaml:3" in message
    message = error_of(tmp_path / "t", {"a.sql": "MODEL (name db.a);\nSELECT 1"},
                       extra={"tests/test_a.yaml": "test_a:\n  model: db.a\n   inputs: x\n"})
    assert "test_a.yaml:3" in message


def test_audit_files(tmp_path):
    audits = "AUDIT (name assert_x, blocking false, defaults (threshold = 10));\n" \
             "SELECT * FROM @this_model WHERE x > @threshold;\n\nAUDIT (name assert_y);\n" \
             "SELECT * FROM @this_model WHERE y IS NULL\n"
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT 1 AS x"},
                        extra={"audits/checks.sql": audits})
    project = load(root)
    assert project.audits["assert_x"].blocking is False
    assert project.audits["assert_x"].defaults == (("threshold", "10"),)
    assert project.audits["assert_y"].line == 4 and project.audits["assert_y"].blocking is True
    assert "WHERE y IS NULL" in project.audits["assert_y"].query_text


def test_two_model_files_may_each_define_their_own_inline_audit_of_one_name(tmp_path):
    """SQLMesh 0.236.4 (a public jaffle-shop project): each model's `unique_id` is its own file's;
    meshbot refused the project ("duplicate audit"). A file defining a name twice is still refused."""
    from bot.quality.audits import resolve_audit

    inline = "\n\nAUDIT (name unique_id);\nSELECT {col} FROM @this_model GROUP BY {col} HAVING COUNT(*) > 1;\n"
    root = make_project(tmp_path, {
        "a.sql": "MODEL (name db.a, kind FULL, audits (unique_id));\nSELECT 1 AS a_id;" + inline.format(col="a_id"),
        "b.sql": "MODEL (name db.b, kind FULL, audits (unique_id));\nSELECT 1 AS b_id;" + inline.format(col="b_id"),
        "c.sql": "MODEL (name db.c, kind FULL, audits (unique_id));\nSELECT 1 AS a_id"})
    project = load(root)
    for name, column in (("db.a", "a_id"), ("db.b", "b_id"), ("db.c", "a_id")):   # c: the first file's
        model = project.models[name]
        (ref,) = model.audits
        assert f"SELECT {column} FROM" in resolve_audit(ref, model=model, audit_defs=project.audits).custom.query_text
    (root / "models" / "b.sql").write_text((root / "models" / "b.sql").read_text() + inline.format(col="x"))
    with pytest.raises(ConfigError, match="duplicate audit `unique_id`: also defined in .*b.sql:4"):
        load(root)
    # a standalone audit runs once, under its name: two of one name stay an error
    standalone = "\n\nAUDIT (name orphans, standalone true);\nSELECT 1 AS x WHERE FALSE;\n"
    for name in ("a.sql", "b.sql"):
        (root / "models" / name).write_text(f"MODEL (name db.{name[0]}, kind FULL);\nSELECT 1 AS x;" + standalone)
    with pytest.raises(ConfigError, match="duplicate audit `orphans`: also defined in .*a.sql:4 "
                                          r"\(a standalone audit's name is the project's\)"):
        load(root)


def model_files(count: int) -> dict[str, str]:
    files = {}
    for i in range(count):
        parent = f"FROM db.m{i - 1} AS p JOIN db.m{max(i - 2, 0)} AS q ON p.id = q.id" if i > 1 else "FROM raw.src AS p"
        files[f"m{i}.sql"] = (f"MODEL (name db.m{i}, kind FULL, grain id, tags [t{i % 5}]);\n"
                              f"SELECT p.id, p.amount * {i} AS v, CASE WHEN p.amount > 10 THEN 'big' END AS size, "
                              f"COALESCE(p.name, 'x') AS name {parent} WHERE p.ds BETWEEN @start_ds AND @end_ds")
    return files


def test_cache_returns_equal_models_without_parsing_again(tmp_path, monkeypatch):
    import bot.project.loader as loader

    root = make_project(tmp_path, model_files(200))   # above parallel.MIN_ITEMS: a cold load may fork
    first = load_project(root)
    assert (root / ".meshbot" / "cache" / "models.json").is_file()

    def no_parse(path, *args, **kwargs):
        raise AssertionError(f"{path} was parsed again although it did not change")

    monkeypatch.setattr(loader, "parse_model_file", no_parse)
    second = load_project(root)
    assert list(first.models) == list(second.models)
    assert all(model_to_dict(first.models[n]) == model_to_dict(second.models[n]) for n in first.models)
    assert second.models["db.m5"].query.find(exp.Table).parent_select is not None
    assert all(second.models[n].query == first.models[n].query for n in first.models)


def test_cache_follows_edits_and_survives_corruption(tmp_path):
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a, kind SEED (path '../seeds/a.csv'));"},
                        extra={"seeds/a.csv": "id\n1\n"})
    first = load_project(root).models["db.a"].seed_content_hash
    (root / "seeds" / "a.csv").write_text("id\n2\n")
    assert load_project(root).models["db.a"].seed_content_hash != first
    (root / "models" / "b.sql").write_text("MODEL (name db.b);\nSELECT 1 AS x")
    assert "db.b" in load_project(root).models
    (root / ".meshbot" / "cache" / "models.json").write_bytes(b"not JSON")
    assert set(load_project(root).models) == {"db.a", "db.b"}
    (root / "models" / "b.sql").write_text("MODEL (name db.b);\nSELECT 2 AS x")
    assert load_project(root).models["db.b"].query.sql() == "SELECT 2 AS x"


def _counting_parses(monkeypatch) -> list[str]:
    import bot.project.loader as loader

    monkeypatch.setenv("MESHBOT_WORKERS", "0")   # parsed here, where the count is kept
    parsed: list[str] = []
    original = loader.parse_model_file
    monkeypatch.setattr(loader, "parse_model_file",
                        lambda path, *a, **k: parsed.append(Path(path).name) or original(path, *a, **k))
    return parsed


def test_a_few_changed_files_write_only_the_changes_file(tmp_path, monkeypatch):
    """A pull request's sync parses one file of many: models.json (every entry) stays as it is and
    models.changes.json holds the new entry; a load after the file is restored uses models.json's."""
    root = make_project(tmp_path, model_files(40))
    first = load_project(root)
    cache, changes = root / CACHE_FILE, root / CHANGES_FILE
    whole = cache.read_bytes()
    parsed = _counting_parses(monkeypatch)
    edited = root / "models" / "m7.sql"
    original = edited.read_text()
    edited.write_text(original.replace("AS v,", "AS v2,"))
    assert "v2" in load_project(root).models["db.m7"].query_text and parsed == ["m7.sql"]
    assert cache.read_bytes() == whole and list(json.loads(changes.read_text())["entries"]) == ["models/m7.sql"]
    again = load_project(root)
    assert parsed == ["m7.sql"] and "v2" in again.models["db.m7"].query_text   # from the changes file
    edited.write_text(original)
    restored = load_project(root)
    assert parsed == ["m7.sql"] and not changes.exists() and cache.read_bytes() == whole
    assert {n: model_to_dict(m) for n, m in restored.models.items()} == \
        {n: model_to_dict(m) for n, m in first.models.items()}


def test_many_changes_a_deleted_file_or_a_fresh_load_write_models_json_whole(tmp_path, monkeypatch):
    root = make_project(tmp_path, model_files(40))
    load_project(root)
    cache, changes = root / CACHE_FILE, root / CHANGES_FILE
    (root / "models" / "m39.sql").write_text((root / "models" / "m39.sql").read_text().replace("AS v,", "AS v2,"))
    load_project(root)
    assert changes.exists()
    (root / "models" / "m38.sql").unlink()   # its entry is dropped: models.json written whole, with m39's
    load_project(root)
    assert not changes.exists() and "models/m38.sql" not in json.loads(cache.read_text())["entries"]
    parsed = _counting_parses(monkeypatch)
    load_project(root)
    assert parsed == []
    for i in range(5):   # more than a sixteenth of the files
        path = root / "models" / f"m{i}.sql"
        path.write_text(path.read_text().replace("AS v,", "AS v3,"))
    load_project(root)
    assert len(parsed) == 5 and not changes.exists()
    entries = json.loads(cache.read_text())["entries"]
    assert sum("v3" in entry[1][0]["model"]["query_text"] for entry in entries.values()) == 5
    (root / "models" / "m9.sql").write_text((root / "models" / "m9.sql").read_text().replace("AS v,", "AS v4,"))
    load_project(root)
    assert changes.exists()
    load_project(root, read_cache=False)   # a deploy's load: models.json from the files, no changes file left
    entry = json.loads(cache.read_text())["entries"]["models/m9.sql"]
    assert not changes.exists() and "v4" in entry[1][0]["model"]["query_text"]


def test_a_garbled_changes_file_is_named_and_ignored(tmp_path, monkeypatch, capsys):
    root = make_project(tmp_path, model_files(40))
    load_project(root)
    path = root / "models" / "m3.sql"
    path.write_text(path.read_text().replace("AS v,", "AS v2,"))
    load_project(root)
    changes = root / CHANGES_FILE
    changes.write_text(changes.read_text().replace('"entries":{', '"entries":{"x":5,'))
    capsys.readouterr()
    parsed = _counting_parses(monkeypatch)
    assert "v2" in load_project(root).models["db.m3"].query_text and parsed == ["m3.sql"]
    err = capsys.readouterr().err
    assert "ignoring the parse cache .meshbot/cache/models.changes.json (not in the shape meshbot writes)" in err
    assert json.loads(changes.read_text())["entries"].keys() == {"models/m3.sql"}   # rewritten


def test_use_cache_false_writes_nothing(tmp_path):
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT 1 AS x"})
    load_project(root, use_cache=False)
    assert not (root / ".meshbot").exists()


def test_python_models_join_the_dag(tmp_path):
    source = ("from bot.project.python_model import model\n\n\n"
              "@model('db.py_totals', columns={'id': 'int', 'total': 'double'}, depends_on=['db.a'])\n"
              "def execute(context, **kwargs):\n    return None\n")
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a);\nSELECT 1 AS id",
                                   "totals.py": source})
    project = load(root)
    assert list(project.models) == ["db.a", "db.py_totals"]
    assert project.models["db.py_totals"].is_python
    assert project.dag.parents["db.py_totals"] == ("db.a",)


def test_files_lists_what_rglob_lists_in_the_same_order(tmp_path):
    """loader._files walks with os.scandir (a 10,000-file folder in milliseconds); it must give what the
    rglob walk gave: hidden entries and their contents left out, symlinked folders not descended into,
    a symlinked file kept, folders named like files left out, sorted as Paths sort."""
    import fnmatch

    from bot.project.loader import _files

    folder = tmp_path / "models"
    for rel in ("b.sql", "a.sql", "A.sql", "sub/z.sql", "sub/deeper/y.sql", "sub-x/q.sql", "sub.x/r.sql",
                ".hidden.sql", ".git/h.sql", "sub/.cache/c.sql", "notes.txt", "dir.sql/inner.sql"):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("SELECT 1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "o.sql").write_text("SELECT 1")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "file_link.sql").symlink_to(folder / "a.sql")
    (folder / "dangling.sql").symlink_to(tmp_path / "missing.sql")

    expected = sorted(path for path in folder.rglob("*")
                      if not any(part.startswith(".") for part in path.relative_to(folder).parts)
                      and fnmatch.fnmatchcase(path.name, "*.sql") and path.is_file())
    assert _files(folder, "*.sql") == expected
    assert folder / "linked" / "o.sql" not in expected and folder / "file_link.sql" in expected


def test_ignore_patterns_match_files_as_path_match_does():
    """The loader matches `ignore_patterns` on path strings (no Path per file); it must decide what
    `Path(path).match(pattern)` decides, anchored or not, with globs in any part."""
    from bot.project.loader import _matches_from_right

    paths = ["/p/models/a.sql", "/p/models/legacy/b.sql", "/p/models/legacy/deep/c_old.sql", "/x.sql",
             "/p/models/.ipynb_checkpoints/d.sql", "/p/models/sub/legacy.sql", "/p/models/a_old.sql"]
    patterns = ["*.sql", "*_old.sql", "models/legacy/*", "legacy/*", "legacy/**", ".ipynb_checkpoints/*",
                "/p/models/*.sql", "/p/models/legacy/*", "/x.sql", "/*", "?/p/models/a.sql", "p/models/a.sql",
                "models/*/*", "*/*/*/*/*/*", "[ab].sql", "sub/legacy.sql", "./legacy/b.sql", "legacy//b.sql",
                "*", "models/legacy/b.sql", "*/legacy/*.sql", "p/*/a.sql", "/p/*/legacy/*/c_old.sql"]
    for pattern in patterns:
        match = _matches_from_right(pattern)
        assert [match(path) for path in paths] == [Path(path).match(pattern) for path in paths], pattern
    with pytest.raises(ValueError):
        _matches_from_right("")("/p/models/a.sql")


def test_only_test_yaml_files_are_unit_tests_as_in_sqlmesh(tmp_path, capsys):
    """SQLMesh 0.236.4 runs tests/**/test*.yaml (a tests/t.yaml ran no test there); meshbot ran every YAML file."""
    root = make_project(tmp_path, {"a.sql": "MODEL (name db.a, kind FULL);\nSELECT 1 AS x"}, extra={
        "tests/test_a.yaml": "test_a:\n  model: db.a\n  outputs:\n    query: [{x: 1}]\n",
        "tests/deep/test_b.yml": "test_b:\n  model: db.a\n  outputs:\n    query: [{x: 1}]\n",
        "tests/fixtures.yaml": "rows: [1, 2]\n"})
    assert [path.relative_to(root).as_posix() for path in load(root).test_files] == [
        "tests/deep/test_b.yml", "tests/test_a.yaml"]
    assert "fixtures.yaml: not a unit test file: SQLMesh runs tests/**/test*.yaml only" in capsys.readouterr().err
