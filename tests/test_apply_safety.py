"""Failed plans leave state, views and prod data as they were; a child waits for its parents' intervals."""

from __future__ import annotations

import shutil

import pytest

from bot.context import Context
from bot.errors import BotError, ConfigError, PlanError
from bot.plan.definition import PlanOptions

from test_faults import write_project

SCHEMA = "aps"
WHEN = PlanOptions(execution_time="2024-01-04")
DEV = PlanOptions(execution_time="2024-01-04", include_unmodified=True)

UNIQUE = """\
MODEL (name aps.keyed, kind INCREMENTAL_BY_UNIQUE_KEY (unique_key nope));
SELECT ds, amount FROM aps.events
"""
SEED = """\
MODEL (name aps.codes, kind SEED (path '../seeds/codes.csv'), columns (code INT, label STRING));
"""
AUDITED = """\
MODEL (name aps.daily, kind FULL, audits (not_null(columns := (total))));
SELECT ds, CAST(NULL AS BIGINT) AS total FROM aps.events GROUP BY ds
"""

# each: files to write (relative to the project) over the applied project
FAILURES = {
    "analysis error": {"models/daily.sql": "MODEL (name aps.daily, kind FULL);\n"
                                           "SELECT ds, SUM(no_such_function(amount)) AS total FROM aps.events GROUP BY ds\n"},
    "unknown column": {"models/daily.sql": "MODEL (name aps.daily, kind FULL);\n"
                                           "SELECT ds, SUM(nope) AS total FROM aps.events GROUP BY ds\n"},
    "name Spark rejects": {"models/bad.sql": "MODEL (name aps.`bad-name`, kind FULL);\nSELECT 1 AS x\n"},
    "unique_key missing": {"models/keyed.sql": UNIQUE},
    "time column missing": {"models/events.sql": (
        "MODEL (name aps.events, kind INCREMENTAL_BY_TIME_RANGE (time_column nope, batch_size 1),\n"
        "       start '2024-01-01', end '2024-01-20');\n"
        "SELECT ds, amount * 2 AS amount, k FROM aps.src WHERE ds BETWEEN @start_ds AND @end_ds\n")},
    "malformed seed": {"models/codes.sql": SEED, "seeds/codes.csv": "code,label\n1,a\nx,b,c,d\n"},
    "audit failure": {"models/daily.sql": AUDITED},
}
# refused before any write, each with what its error names: a key/time column the query lacks, a column no
# parent has (found before Spark), a seed row with more fields than its header
CAUGHT_WHEN_PLANNING = {"unique_key missing": "nope", "time column missing": "nope", "unknown column": "nope",
                        "malformed seed": "codes.csv"}


@pytest.fixture(scope="module")
def applied(spark, tmp_path_factory):
    """A project with `prod` and `dev` applied; the directory is restored after each test."""
    root = write_project(tmp_path_factory.mktemp("aps") / "proj", SCHEMA)
    context = Context(root)
    context.apply(context.plan("prod", options=WHEN))
    context.apply(context.plan("dev", options=DEV))
    pristine = root.parent / "pristine"
    shutil.copytree(root / "models", pristine)
    yield root
    for row in spark.sql("SHOW DATABASES").collect():
        if row[0].startswith(SCHEMA):
            spark.sql(f"DROP DATABASE IF EXISTS `{row[0]}` CASCADE")


@pytest.fixture
def project(applied):
    yield applied
    shutil.rmtree(applied / "models")
    shutil.copytree(applied.parent / "pristine", applied / "models")
    shutil.rmtree(applied / "seeds", ignore_errors=True)


def _everything(context: Context) -> dict:
    """Every environment row, every view's rows, and the physical tables, as a user could see them."""
    views = {}
    for env in context.state.get_environments():
        for snapshot in env.snapshots:
            view = context.view_name(snapshot.name, env.name)
            views[view] = sorted(map(repr, context.fetchdf(f"SELECT * FROM {view}")))
    tables = sorted(r["tableName"] for r in context.fetchdf(f"SHOW TABLES IN sqlmesh__{SCHEMA}"))
    return {"environments": context.state.get_environments(), "views": views, "tables": tables}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failed_plan_leaves_environments_views_and_data_as_before(project, failure):
    before = _everything(Context(project))
    for relative, text in FAILURES[failure].items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(text)
    context = Context(project)
    if failure in CAUGHT_WHEN_PLANNING:
        with pytest.raises(BotError, match=CAUGHT_WHEN_PLANNING[failure]):
            context.plan("prod", options=WHEN)
        assert _everything(Context(project)) == before
        return
    plan = context.plan("prod", options=WHEN)
    with pytest.raises(BotError):
        context.apply(plan)
    after = _everything(Context(project))
    assert after["environments"] == before["environments"]
    assert after["views"] == before["views"]
    created = set(after["tables"]) - set(before["tables"])
    # what the failed plan created holds no recorded interval, and the janitor removes it
    recorded = context.state.get_intervals({(s.name, s.version) for s in plan.new_snapshots})
    assert {key for key, found in recorded.items() if found.intervals} == set()
    janitor = Context(project).janitor(ignore_ttl=True)
    assert set(t.split(".")[1] for t in janitor.tables) == created
    assert _everything(Context(project)) == before


def test_a_before_all_that_does_not_parse_names_the_config_file_and_changes_nothing(project):
    config = project / "config.yaml"
    original = config.read_text()
    before = _everything(Context(project))
    (project / "models" / "other.sql").write_text("MODEL (name aps.other, kind FULL);\nSELECT 43 AS answer\n")
    config.write_text(original + "before_all:\n  - SELECT 1 FROM (\n")
    try:
        context = Context(project)
        with pytest.raises(ConfigError) as info:
            context.apply(context.plan("prod", options=WHEN))
    finally:
        config.write_text(original)
    assert str(info.value).startswith(f"{config}: `before_all` statement `SELECT 1 FROM (` does not parse")
    assert "engine" not in context.__dict__          # refused before this context reached Spark
    assert _everything(Context(project)) == before


def test_a_child_waits_for_its_parents_intervals(project):
    (project / "models" / "daily.sql").write_text(
        "MODEL (name aps.daily, kind FULL);\n"
        "SELECT ds, SUM(amount) AS total, COUNT(*) AS n FROM aps.events GROUP BY ds\n")
    context = Context(project)
    before = _everything(context)
    # prod's events hold 2024-01-01..03; a dev plan reaching 2024-01-08 would read an empty parent
    plan = context.plan("dev2", options=PlanOptions(execution_time="2024-01-10", end="2024-01-08"))
    with pytest.raises(PlanError) as info:
        context.apply(plan)
    message = str(info.value)
    assert "`aps.daily` [2024-01-01 - 2024-01-08]" in message
    assert "parent `aps.events` has no data for [2024-01-04 - 2024-01-08]" in message
    assert _everything(Context(project)) == before
    new = plan.snapshots["aps.daily"]
    assert context.state.get_intervals([(new.name, new.version)])[(new.name, new.version)].intervals == []

    # within the parents' data the same change applies, and the child's rows come from them
    context = Context(project)
    context.apply(context.plan("dev2", options=PlanOptions(execution_time="2024-01-04")))
    assert context.fetchdf("SELECT ds, total, n FROM aps__dev2.daily ORDER BY ds") == [
        {"ds": f"2024-01-0{day}", "total": 3 * day, "n": 3} for day in (1, 2, 3)]
    context.invalidate("dev2", sync=True)


class _Killed(BaseException):
    """Stands in for SIGKILL in-process: no `except Exception` handler sees it."""


def _kill_after_state_write(monkeypatch) -> None:
    """The next apply dies right after writing the environment row, before any view changes."""
    import bot.plan.evaluator as evaluator

    def kill(point: str) -> None:
        if point == "after-state-write":
            raise _Killed(point)

    monkeypatch.setattr(evaluator, "checkpoint", kill)


def test_run_finishes_a_promotion_a_killed_plan_left_unfinalized(project, monkeypatch):
    (project / "models" / "other.sql").write_text("MODEL (name aps.other, kind FULL);\nSELECT 7 AS answer\n")
    context = Context(project)

    _kill_after_state_write(monkeypatch)
    plan = context.plan("prod", options=WHEN)
    with pytest.raises(_Killed):
        context.apply(plan)
    monkeypatch.undo()
    env = context.state.get_environment("prod")
    assert env.plan_id == plan.plan_id and env.finalized_ts is None
    assert context.fetchdf("SELECT answer FROM aps.other") == [{"answer": 42}]   # old view still

    result = Context(project).run("prod", execution_time="2024-01-04")
    assert result.nothing_due
    env = context.state.get_environment("prod")
    assert env.plan_id == plan.plan_id and env.finalized_ts is not None
    assert context.fetchdf("SELECT answer FROM aps.other") == [{"answer": 7}]


def test_a_killed_promotion_that_removed_a_model_drops_its_view_when_finished(project, monkeypatch):
    """The row naming the new models is written before the views change; killed there, the next plan
    or run finishes the promotion, including dropping the view of the model the plan removed."""
    (project / "models" / "other.sql").unlink()
    context = Context(project)

    _kill_after_state_write(monkeypatch)
    plan = context.plan("prod", options=WHEN)
    assert [c.name for c in plan.changes] == ["aps.other"]
    with pytest.raises(_Killed):
        context.apply(plan)
    monkeypatch.undo()
    assert context.engine.session.catalog.tableExists("aps.other")   # still served until finished

    assert Context(project).run("prod", execution_time="2024-01-04").nothing_due
    env = context.state.get_environment("prod")
    assert env.finalized_ts is not None and "aps.other" not in env.by_name()
    assert not context.engine.session.catalog.tableExists("aps.other")
