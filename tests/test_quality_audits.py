"""Audits on Spark: every built-in failing and passing on one table, custom audit files, blocking rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError, QualityError
from bot.spark.engine import SparkEngine
from bot.project.config import load_config
from bot.project.loader import load_audits
from bot.project.model import AuditRef, Kind, KindName, Model
from bot.quality.results import raise_for_audits
from bot.quality.audits import run_audits

ROWS = """
SELECT id, name, status, amount, CAST(ds AS DATE) AS ds, CAST(NULL AS INT) AS empty, 'x' AS const
FROM VALUES (1, 'a', 'open', 10, '2024-01-01'), (2, 'b', 'closed', 20, '2024-01-02'),
            (2, '', 'bogus', NULL, '2024-01-03'), (CAST(NULL AS INT), 'd', 'open', 30, '2024-01-03')
  AS t(id, name, status, amount, ds)
"""

# (audit, args, expected violation count)
CASES = [
    ("not_null", {"columns": "(id, name)"}, 1),
    ("not_null", {"columns": "(name)"}, 0),
    ("unique_values", {"columns": "(id)"}, 1),
    ("unique_values", {"columns": "(name, status)"}, 1),
    ("accepted_values", {"column": "status", "is_in": "('open', 'closed')"}, 1),
    ("accepted_values", {"column": "status", "is_in": "('open', 'closed', 'bogus')"}, 0),
    ("not_accepted_values", {"column": "status", "is_in": "('bogus')"}, 1),
    ("not_accepted_values", {"column": "status", "is_in": "('x', 'y')"}, 0),
    ("number_of_rows", {"threshold": "3"}, 0),
    ("number_of_rows", {"threshold": "4"}, 1),
    ("forall", {"criteria": "(amount > 0, id < 100)"}, 0),
    ("forall", {"criteria": "(amount < 25, LENGTH(name) = 1)"}, 2),
    ("accepted_range", {"column": "amount", "min_v": "10", "max_v": "30"}, 0),
    ("accepted_range", {"column": "amount", "min_v": "10", "max_v": "30", "inclusive": "false"}, 2),
    ("accepted_range", {"column": "amount", "max_v": "15"}, 2),
    ("at_least_one", {"column": "amount"}, 0),
    ("at_least_one", {"column": "empty"}, 1),
    ("not_constant", {"column": "status"}, 0),
    ("not_constant", {"column": "const"}, 1),
    ("unique_combination_of_columns", {"columns": "(id, name)"}, 0),
    ("unique_combination_of_columns", {"columns": "(id)"}, 1),
    ("not_empty_string", {"column": "status"}, 0),
    ("not_empty_string", {"column": "name"}, 1),
]


def _model(*audits: AuditRef, kind: Kind = Kind(KindName.FULL), path: Path = Path("models/t.sql")) -> Model:
    return Model(name="db.t", kind=kind, dialect="spark", path=path, audits=audits)


def _ref(name: str, args: dict[str, str], blocking: bool = True) -> AuditRef:
    return AuditRef(name=name, args=tuple(args.items()), blocking=blocking)


@pytest.fixture(scope="module")
def audited(spark):
    spark.sql(ROWS).createOrReplaceTempView("audited_t")
    yield "audited_t"
    spark.catalog.dropTempView("audited_t")


def test_every_built_in_audit_fails_and_passes(spark, audited):
    model = _model(*(_ref(name, args) for name, args, _ in CASES))
    results = run_audits(engine=SparkEngine(spark), model=model, table=audited)
    got = [(r.audit, r.violation_count) for r in results]
    assert got == [(name, count) for name, _, count in CASES]
    assert all(r.blocking for r in results)
    failed = [r for r in results if not r.passed]
    assert all(0 < len(r.sample_rows) <= 5 for r in failed)
    assert all(r.sample_rows == () for r in results if r.passed)
    assert results[0].sample_rows[0]["name"] == "d"        # the row whose id is NULL
    assert "`audited_t`" in results[0].query


def test_non_blocking_audits_warn_and_blocking_ones_raise(spark, audited):
    model = _model(_ref("not_null_non_blocking", {"columns": "(id)"}),
                   _ref("not_empty_string", {"column": "name", "blocking": "false"}),
                   _ref("accepted_values", {"column": "status", "is_in": "('open')"}))
    results = run_audits(engine=SparkEngine(spark), model=model, table=audited)
    assert [(r.audit, r.blocking, r.violation_count) for r in results] == [
        ("not_null", False, 1), ("not_empty_string", False, 1), ("accepted_values", True, 2)]
    with pytest.raises(QualityError) as info:
        raise_for_audits(results)
    message = str(info.value)
    assert "1 blocking audit(s) failed" in message
    assert "audit `accepted_values` (blocking) on model `db.t` failed: 2 violating row(s)" in message
    assert "bogus" in message and "closed" in message     # the sample rows
    assert "not_null" not in message
    assert info.value.failures == (results[2],)
    raise_for_audits(results[:2])                          # warnings only: no error


def test_incremental_audit_sees_only_the_interval(spark, audited):
    kind = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    model = _model(_ref("not_null", {"columns": "(id)"}), kind=kind)
    day = 86_400_000
    jan3 = 1704240000000
    [late] = run_audits(engine=SparkEngine(spark), model=model, table=audited, start=jan3, end=jan3 + day)
    [early] = run_audits(engine=SparkEngine(spark), model=model, table=audited,
                         start=jan3 - 2 * day, end=jan3)
    assert (late.violation_count, early.violation_count) == (1, 0)
    assert "BETWEEN CAST('2024-01-03' AS DATE) AND CAST('2024-01-03' AS DATE)" in late.query


def test_custom_audit_file_with_args_and_defaults(spark, audited, tmp_path):
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (tmp_path / "audits").mkdir()
    (tmp_path / "audits" / "limits.sql").write_text(
        "AUDIT (name above_max, defaults (max_value = 25));\n"
        "SELECT * FROM @this_model AS m WHERE m.@column > @max_value;\n"
        "AUDIT (name warn_status, blocking false);\n"
        "SELECT * FROM @this_model WHERE status = @bad;\n")
    defs = load_audits(tmp_path, load_config(tmp_path))
    model = _model(_ref("above_max", {"column": "amount"}),
                   _ref("above_max", {"column": "amount", "max_value": "5"}),
                   _ref("warn_status", {"bad": "'bogus'"}))
    results = run_audits(engine=SparkEngine(spark), model=model, audit_defs=defs, table=audited)
    assert [(r.audit, r.blocking, r.violation_count) for r in results] == [
        ("above_max", True, 1), ("above_max", True, 3), ("warn_status", False, 1)]
    assert results[0].sample_rows[0]["amount"] == 30


def test_unknown_audit_or_missing_argument_is_a_config_error(spark, audited):
    with pytest.raises(ConfigError, match=r"models/t.sql.*db\.t uses unknown audit `nope`"):
        run_audits(engine=SparkEngine(spark), model=_model(_ref("nope", {})), table=audited)
    with pytest.raises(ConfigError, match="audit `not_null` of model db.t: missing argument.*columns"):
        run_audits(engine=SparkEngine(spark), model=_model(_ref("not_null", {})), table=audited)
