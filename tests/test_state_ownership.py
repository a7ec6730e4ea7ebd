"""One state per warehouse: a physical schema carries the id of the state that writes it, so a recreated
state or a second state on the same catalog is refused instead of appending to tables it knows nothing of;
a table whose intervals the state records but which is gone is not served as filled."""

from __future__ import annotations

import shutil

import pytest

from bot.context import Context
from bot.errors import PlanError
from bot.plan.definition import PlanOptions

from test_faults import write_project

SCHEMA = "own"
WHEN = PlanOptions(execution_time="2024-01-04")


def _rows(context: Context) -> int:
    return context.fetchdf(f"SELECT COUNT(*) AS n FROM {SCHEMA}.events")[0]["n"]


def test_a_recreated_state_is_refused_before_it_appends_to_the_tables(tmp_path, clean_catalog):
    root = write_project(tmp_path / "proj", SCHEMA)
    first = Context(root)
    first.apply(first.plan("prod", options=WHEN))
    rows = _rows(first)
    physical = f"sqlmesh__{SCHEMA}"
    assert first.engine.fetch(f"DESCRIBE SCHEMA EXTENDED {physical}")   # the schema exists, with its owner

    (root / ".meshbot" / "state.db").unlink()            # the state database is recreated, the catalog stays
    second = Context(root)
    plan = second.plan("prod", options=WHEN)
    with pytest.raises(PlanError, match=rf"physical schema `{physical}` belongs to another meshbot state"):
        second.apply(plan)
    assert second.state.get_environment("prod") is None
    assert second.state.get_snapshots_by_version([(s.name, s.version) for s in plan.snapshots.values()]) == []
    assert _rows(second) == rows                          # nothing appended (the view still reads the old table)


def test_a_schema_without_an_owner_is_claimed_by_the_state_that_uses_it(tmp_path, clean_catalog):
    """Tables written before schemas carried their owner: the state that knows them claims the schema on
    its next plan; a state that never wrote there is refused."""
    root = write_project(tmp_path / "proj", SCHEMA)
    context = Context(root)
    context.apply(context.plan("prod", options=WHEN))
    physical = f"sqlmesh__{SCHEMA}"
    context.engine.sql(f"ALTER SCHEMA {physical} SET DBPROPERTIES ('meshbot.state_id' = '')")   # as before

    other = tmp_path / "other"
    shutil.copytree(root, other, ignore=shutil.ignore_patterns(".meshbot"))
    stranger = Context(other)
    stranger.__dict__["engine"] = context.engine           # the same catalog, its own (new) state
    with pytest.raises(PlanError, match=rf"physical schema `{physical}` holds tables no meshbot state has claimed"):
        stranger.apply(stranger.plan("prod", options=WHEN))

    write_project(root, SCHEMA, amount="amount + 1")       # a change: the owner plans again
    again = Context(root)
    again.apply(again.plan("prod", options=WHEN))
    owner = [r for r in again.engine.fetch(f"DESCRIBE SCHEMA EXTENDED {physical}") if r["info_name"] == "Properties"]
    assert again.state.state_id in owner[0]["info_value"]


def test_a_table_dropped_outside_meshbot_is_computed_again_not_served_empty(tmp_path, clean_catalog):
    root = write_project(tmp_path / "proj", SCHEMA)
    prod = Context(root)
    prod.apply(prod.plan("prod", options=WHEN))
    expected = prod.fetchdf(f"SELECT ds, total FROM {SCHEMA}.daily ORDER BY ds")
    events = prod.state.get_environment("prod").by_name()[f"{SCHEMA}.events"].table_name
    prod.engine.sql(f"DROP TABLE {events}")

    dev = Context(root)
    plan = dev.plan("dev", options=PlanOptions(execution_time="2024-01-04", include_unmodified=True))
    with pytest.raises(PlanError, match=r"are missing although the state recorded intervals"):
        dev.apply(plan)
    assert dev.state.get_environment("dev") is None
    daily = plan.snapshots[f"{SCHEMA}.daily"]        # computed from the lost rows: recomputed with them
    assert dev.state.get_intervals([(daily.name, daily.version)])[(daily.name, daily.version)].intervals == []
    again = Context(root)
    again.apply(again.plan("dev", options=PlanOptions(execution_time="2024-01-04", include_unmodified=True)))
    assert again.fetchdf(f"SELECT ds, total FROM {SCHEMA}__dev.daily ORDER BY ds") == expected

