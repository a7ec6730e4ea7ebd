"""Which driver JVM a command asks for: work that only touches the catalog (a deploy without backfill,
the janitor) asks for a catalog-only JVM (C1 compiler alone, shorter stack traces); anything that reads or writes data keeps
HotSpot's default; a session already running is used as it is."""

from __future__ import annotations

import pytest

import bot.spark.session as session_module
from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.spark.session import CATALOG_ONLY_JVM, java_options
from ops_project import CONFIG
from project_files import write_files

FILES = {
    "config.yaml": CONFIG,
    "models/numbers.sql": "MODEL (name jvmprof.numbers, kind FULL);\nSELECT 1 AS n UNION ALL SELECT 2 AS n\n",
    "models/doubled.sql": "MODEL (name jvmprof.doubled, kind VIEW);\nSELECT n * 2 AS n FROM jvmprof.numbers\n",
}


@pytest.fixture
def asked(monkeypatch, clean_catalog):
    """The `catalog_only` of each session a Context asks for; the run's real session is still returned."""
    calls: list[bool] = []
    real = session_module.get_session

    def recording(connection, *, state_dir, catalog_only=False):
        calls.append(catalog_only)
        return real(connection, state_dir=state_dir, catalog_only=catalog_only)

    monkeypatch.setattr(session_module, "get_session", recording)
    return calls


@pytest.fixture
def project(tmp_path):
    return write_files(tmp_path / "jvmprof", FILES)


def test_a_deploy_without_backfill_asks_for_a_catalog_only_jvm(project, asked, spark):
    context = Context(project)
    result = context.apply(context.plan("prod", options=PlanOptions(skip_backfill=True)))
    assert asked == [True]
    assert result.evaluated == ()
    assert spark.catalog.tableExists("jvmprof.numbers") and spark.catalog.tableExists("jvmprof.doubled")


def test_a_deploy_with_batches_keeps_the_default_jvm(project, asked, spark):
    context = Context(project)
    result = context.apply(context.plan("prod"))
    assert asked == [False]
    assert [name for name, _, _ in result.evaluated] == ["jvmprof.numbers", "jvmprof.doubled"]
    assert sorted(row.n for row in spark.table("jvmprof.doubled").collect()) == [2, 4]


def test_the_janitor_asks_for_a_catalog_only_jvm(project, asked):
    Context(project).janitor()
    assert asked == [True]


def test_a_context_that_started_spark_keeps_its_session(project, asked):
    context = Context(project)
    context.start_engine()
    context.apply(context.plan("prod", options=PlanOptions(skip_backfill=True)))
    assert asked == [False]


def test_the_catalog_only_options_come_before_the_users_so_theirs_win(tmp_path):
    options = java_options(tmp_path, "-XX:TieredStopAtLevel=4 -XX:MaxJavaStackTraceDepth=0", verbose=True,
                           catalog_only=True).split()
    assert options.index("-XX:TieredStopAtLevel=1") < options.index("-XX:TieredStopAtLevel=4")
    assert options.index("-XX:MaxJavaStackTraceDepth=64") < options.index("-XX:MaxJavaStackTraceDepth=0")
    assert not set(CATALOG_ONLY_JVM) & set(java_options(tmp_path, verbose=True).split())
