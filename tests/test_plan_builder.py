"""Plan builder scenarios against a real SQLite state: changes, categories, versions, backfills, errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from bot.errors import ConfigError, PlanError
from bot.plan.builder import build_plan
from bot.plan.definition import BackfillKind, ChangeType, Plan, PlanOptions
from bot.project.config import ModelDefaults, ProjectConfig
from bot.project.dag import DAG
from bot.project.model import Kind, KindName, Model
from bot.project.render import normalized_query_sql
from bot.timeline.times import to_ms
from bot.snapshot import ChangeCategory
from bot.state.protocol import Environment, EnvironmentSnapshot

DAY = 86_400_000
NOW = to_ms("2024-02-01 10:00:00")
INCR = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")


def make(name: str, sql: str, **fields) -> Model:
    query = sqlglot.parse_one(sql, read="spark")
    deps = frozenset(f"{t.db}.{t.name}" for t in query.find_all(exp.Table))
    return Model(name=name, kind=fields.pop("kind", Kind(KindName.FULL)), dialect="spark",
                 path=Path(f"models/{name.split('.')[1]}.sql"), query=query, query_text=sql,
                 depends_on=deps, **fields)


ORDERS = "SELECT id, amount, ds FROM raw.orders"
REVENUE = "SELECT ds, SUM(amount) AS revenue FROM db.orders GROUP BY ds"


def project(**overrides: Model) -> dict[str, Model]:
    models = {
        "db.orders": make("db.orders", ORDERS, kind=INCR),
        "db.revenue": make("db.revenue", REVENUE),
        "db.top": make("db.top", "SELECT ds FROM db.revenue", kind=Kind(KindName.VIEW)),
    }
    models.update({m.name: m for m in overrides.values()})
    return {k: v for k, v in models.items() if v is not None}


@pytest.fixture
def config(tmp_path) -> ProjectConfig:
    return ProjectConfig(root=tmp_path, gateways={}, default_gateway="local",
                         model_defaults=ModelDefaults(start="2024-01-01"))


@pytest.fixture
def state(sqlite_state):
    return sqlite_state


def plan_for(state, config, models, env="prod", now=NOW, **options) -> Plan:
    rendered = {n: normalized_query_sql(m) for n, m in models.items() if m.query is not None}
    return build_plan(project_models=models, dag=None, rendered=rendered, state=state, environment=env,
                      options=PlanOptions(**options), config=config, now_ms=now)


def apply(state, plan: Plan) -> None:
    """What the evaluator records: snapshots, each backfilled interval, then the environment."""
    state.push_snapshots(plan.new_snapshots)
    for backfill in plan.backfills:
        if backfill.kind is BackfillKind.RECREATE_VIEW:
            continue   # as bot.plan.evaluator: views record no intervals
        for batch in backfill.batches:
            state.add_interval(backfill.snapshot_id.name, plan.snapshots[backfill.snapshot_id.name].version,
                               batch, is_dev=backfill.is_dev)
    entries = tuple(EnvironmentSnapshot(s.name, s.identifier, s.version, s.kind, s.table_name)
                    for s in plan.snapshots.values())
    state.promote(Environment(plan.environment, entries, plan.plan_id), expected_plan_id=plan.expected_plan_id)


def change(plan: Plan, name: str):
    found = plan.change_for(name)
    assert found is not None, f"{name} not in {[c.name for c in plan.changes]}"
    return found.change, found.category


def backfill(plan: Plan, name: str):
    return next((b for b in plan.backfills if b.snapshot_id.name == name), None)


def test_first_prod_plan_adds_everything_and_backfills_from_start(state, config):
    plan = plan_for(state, config, project())
    assert plan.new_environment and plan.expected_plan_id is None
    assert {c.name: c.change for c in plan.changes} == {n: ChangeType.ADDED for n in project()}
    orders = backfill(plan, "db.orders")
    assert orders.kind is BackfillKind.INTERVALS
    assert orders.intervals[0] == (to_ms("2024-01-01"), to_ms("2024-01-02"))
    assert orders.intervals[-1] == (to_ms("2024-01-31"), to_ms("2024-02-01"))
    assert orders.batches == ((to_ms("2024-01-01"), to_ms("2024-02-01")),)
    assert backfill(plan, "db.revenue").kind is BackfillKind.FULL_REFRESH
    assert backfill(plan, "db.top").kind is BackfillKind.RECREATE_VIEW
    snap = plan.snapshots["db.orders"]
    assert snap.table_name == f"sqlmesh__db.db__orders__{snap.version}"


def test_unchanged_prod_has_no_changes_and_reuses_snapshots(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    again = plan_for(state, config, project())
    assert not again.changes and not again.new_snapshots and not again.backfills
    assert again.expected_plan_id == first.plan_id
    assert again.snapshots["db.orders"] == first.snapshots["db.orders"]


def test_next_day_prod_backfills_the_new_interval_and_refreshes_full_models(state, config):
    """As SQLMesh 0.236.4 (`plan` a day later, no change: the incremental model's new day, `[full
    refresh]` of the FULL model over it, the view left as it is)."""
    apply(state, plan_for(state, config, project()))
    later = plan_for(state, config, project(), now=NOW + DAY)
    assert [b.snapshot_id.name for b in later.backfills] == ["db.orders", "db.revenue"]
    new_day = (to_ms("2024-02-01"), to_ms("2024-02-02"))
    assert backfill(later, "db.orders").intervals == (new_day,)
    revenue = backfill(later, "db.revenue")
    assert revenue.kind is BackfillKind.FULL_REFRESH and revenue.batches == (new_day,)
    apply(state, later)
    assert not plan_for(state, config, project(), now=NOW + DAY).backfills


def test_non_breaking_change_and_indirect_children(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    models = project(o=make("db.orders", "SELECT id, amount, ds, 1 AS one FROM raw.orders", kind=INCR))
    plan = plan_for(state, config, models)
    assert change(plan, "db.orders") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.NON_BREAKING)
    assert change(plan, "db.revenue") == (ChangeType.INDIRECTLY_MODIFIED, ChangeCategory.INDIRECT_NON_BREAKING)
    assert change(plan, "db.top") == (ChangeType.INDIRECTLY_MODIFIED, ChangeCategory.INDIRECT_NON_BREAKING)
    assert plan.snapshots["db.orders"].version != first.snapshots["db.orders"].version
    assert plan.snapshots["db.revenue"].version == first.snapshots["db.revenue"].version
    assert plan.change_for("db.orders").indirect_children == ("db.revenue", "db.top")
    assert "+  1 AS one" in plan.change_for("db.orders").diff  # the query as written
    assert [b.snapshot_id.name for b in plan.backfills] == ["db.orders"]


def test_breaking_change_rebuilds_children(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    plan = plan_for(state, config, project(o=make("db.orders", ORDERS + " WHERE amount > 0", kind=INCR)))
    assert change(plan, "db.orders") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.BREAKING)
    assert change(plan, "db.revenue") == (ChangeType.INDIRECTLY_MODIFIED, ChangeCategory.INDIRECT_BREAKING)
    assert plan.snapshots["db.revenue"].version != first.snapshots["db.revenue"].version
    assert {b.snapshot_id.name: b.kind for b in plan.backfills} == {
        "db.orders": BackfillKind.INTERVALS, "db.revenue": BackfillKind.FULL_REFRESH,
        "db.top": BackfillKind.RECREATE_VIEW}


def test_kind_change_is_breaking(state, config):
    apply(state, plan_for(state, config, project()))
    plan = plan_for(state, config, project(r=make("db.revenue", REVENUE, kind=Kind(KindName.VIEW))))
    assert change(plan, "db.revenue") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.BREAKING)


def test_metadata_only_change_keeps_version_and_needs_no_backfill(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    plan = plan_for(state, config, project(r=make("db.revenue", REVENUE, owner="alice")))
    assert change(plan, "db.revenue") == (ChangeType.METADATA_UPDATED, ChangeCategory.METADATA)
    # SQLMesh lists only the model whose metadata changed; its children get new snapshots silently
    assert plan.change_for("db.top") is None
    assert plan.snapshots["db.top"].version == first.snapshots["db.top"].version
    assert plan.snapshots["db.revenue"].version == first.snapshots["db.revenue"].version
    assert plan.snapshots["db.revenue"].identifier != first.snapshots["db.revenue"].identifier
    assert not plan.backfills


def test_reverted_change_reuses_the_old_snapshot_and_table(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    changed = plan_for(state, config, project(o=make("db.orders", ORDERS + " WHERE id > 0", kind=INCR)))
    apply(state, changed)
    reverted = plan_for(state, config, project())
    assert reverted.snapshots["db.orders"] == first.snapshots["db.orders"]
    assert not reverted.new_snapshots
    assert change(reverted, "db.orders")[0] is ChangeType.DIRECTLY_MODIFIED
    # the old versions' intervals are still recorded; only the view is pointed back
    assert {b.snapshot_id.name: b.kind for b in reverted.backfills} == {"db.top": BackfillKind.RECREATE_VIEW}


def test_removed_model_still_referenced_is_an_error(state, config):
    apply(state, plan_for(state, config, project()))
    models = project()
    del models["db.orders"]
    with pytest.raises(PlanError, match=r"`db.orders` was removed but `db.revenue` \(models/revenue.sql\)"):
        plan_for(state, config, models)


def test_removed_leaf_is_listed(state, config):
    apply(state, plan_for(state, config, project()))
    models = project()
    del models["db.top"]
    plan = plan_for(state, config, models)
    assert change(plan, "db.top") == (ChangeType.REMOVED, None)
    assert "db.top" not in plan.snapshots


def test_new_dev_without_changes_is_an_error_unless_include_unmodified(state, config):
    apply(state, plan_for(state, config, project()))
    with pytest.raises(PlanError, match="project files match `prod`; nothing to plan for `dev`"):
        plan_for(state, config, project(), env="dev")
    plan = plan_for(state, config, project(), env="dev", include_unmodified=True)
    assert plan.new_environment and not plan.changes and not plan.backfills


def test_dev_backfills_only_changed_models_capped_at_prod_end(state, config):
    apply(state, plan_for(state, config, project()))
    models = project(r=make("db.revenue", REVENUE + " HAVING SUM(amount) > 0"))
    plan = plan_for(state, config, models, env="Feature/X", now=NOW + 3 * DAY)
    assert plan.environment == "feature_x" and plan.new_environment
    assert plan.expected_plan_id is None
    assert change(plan, "db.revenue") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.BREAKING)
    assert {b.snapshot_id.name for b in plan.backfills} == {"db.revenue", "db.top"}
    assert backfill(plan, "db.revenue").intervals[0][1] == to_ms("2024-02-01")   # prod's end, not now


def test_dev_non_breaking_change_backfills_incremental_up_to_prod_end(state, config):
    apply(state, plan_for(state, config, project()))
    models = project(o=make("db.orders", "SELECT id, amount, ds, 2 AS two FROM raw.orders", kind=INCR))
    plan = plan_for(state, config, models, env="dev", now=NOW + 3 * DAY)
    assert [b.snapshot_id.name for b in plan.backfills] == ["db.orders"]
    assert backfill(plan, "db.orders").intervals[-1][1] == to_ms("2024-02-01")


def test_forward_only_keeps_version_and_previews_in_dev(state, config):
    first = plan_for(state, config, project())
    apply(state, first)
    models = project(o=make("db.orders", ORDERS + " WHERE id > 0", kind=INCR))
    dev = plan_for(state, config, models, env="dev", forward_only=True)
    assert change(dev, "db.orders") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.FORWARD_ONLY)
    assert dev.snapshots["db.orders"].version == first.snapshots["db.orders"].version
    assert backfill(dev, "db.orders").is_dev
    prod = plan_for(state, config, models, forward_only=True)
    assert change(prod, "db.orders")[1] is ChangeCategory.FORWARD_ONLY
    assert not prod.backfills


def test_skip_backfill_and_start_end_narrowing(state, config):
    assert not plan_for(state, config, project(), skip_backfill=True).backfills
    plan = plan_for(state, config, project(), start="2024-01-10", end="2024-01-12")
    assert backfill(plan, "db.orders").intervals == tuple(
        (to_ms(d), to_ms(d) + DAY) for d in ("2024-01-10", "2024-01-11", "2024-01-12"))


def test_restatement_cascades_downstream(state, config):
    apply(state, plan_for(state, config, project()))
    plan = plan_for(state, config, project(), restate_models=("db.orders",), start="2024-01-30")
    assert {sid.name for sid in plan.restatements} == {"db.orders", "db.revenue"}
    assert backfill(plan, "db.orders").intervals == ((to_ms("2024-01-30"), to_ms("2024-01-31")),
                                                     (to_ms("2024-01-31"), to_ms("2024-02-01")))
    assert backfill(plan, "db.revenue").kind is BackfillKind.FULL_REFRESH
    with pytest.raises(PlanError, match="--restate-model: selector `nope` matches no model"):
        plan_for(state, config, project(), restate_models=("nope",))


def test_no_gaps_refuses_a_new_version_with_a_hole(state, config):
    apply(state, plan_for(state, config, project()))
    models = project(o=make("db.orders", ORDERS + " WHERE id > 0", kind=INCR))
    with pytest.raises(PlanError, match="--no-gaps: `db.orders` would have a gap"):
        plan_for(state, config, models, no_gaps=True, start="2024-01-20")
    assert plan_for(state, config, models, no_gaps=True).backfills


def test_select_star_child_of_non_breaking_parent_is_recategorized(state, config):
    models = project(r=make("db.revenue", "SELECT * FROM db.orders"))
    first = plan_for(state, config, models)
    apply(state, first)
    changed = dict(models, **{"db.orders": make("db.orders", "SELECT id, amount, ds, 1 AS one FROM raw.orders",
                                                 kind=INCR)})
    plan = plan_for(state, config, changed)
    assert change(plan, "db.revenue") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.NON_BREAKING)
    assert plan.snapshots["db.revenue"].version != first.snapshots["db.revenue"].version
    assert backfill(plan, "db.revenue").kind is BackfillKind.FULL_REFRESH


def test_thousand_unchanged_models_plan_nothing(state, config):
    models = {"db.m0": make("db.m0", "SELECT id, ds FROM raw.src", kind=INCR)}
    for i in range(1, 1000):
        models[f"db.m{i}"] = make(f"db.m{i}", f"SELECT id, ds FROM db.m{i - 1}" if i % 10 else
                                  "SELECT id, ds FROM raw.src", kind=INCR if i % 2 else Kind(KindName.FULL))
    apply(state, plan_for(state, config, models))
    rendered = {n: normalized_query_sql(m) for n, m in models.items()}
    plan = build_plan(project_models=models, dag=None, rendered=rendered, state=state, environment="prod",
                      options=PlanOptions(), config=config, now_ms=NOW)
    assert not plan.changes and not plan.backfills


def seed_model(path: Path, text: str) -> Model:
    path.write_text(text)
    return Model(name="db.seed", kind=Kind(KindName.SEED, seed_path=path.name), dialect="spark", path=path,
                 seed_abs_path=path, seed_content_hash=hashlib.sha256(text.encode()).hexdigest())


def test_seed_appending_a_column_is_non_breaking_changing_rows_is_breaking(state, config, tmp_path):
    csv_path = tmp_path / "seed.csv"
    first = plan_for(state, config, {"db.seed": seed_model(csv_path, "id,name\n1,a\n2,b\n")})
    assert backfill(first, "db.seed").kind is BackfillKind.FULL_REFRESH
    apply(state, first)
    appended = plan_for(state, config, {"db.seed": seed_model(csv_path, "id,name,email\n1,a,x\n2,b,y\n")})
    assert change(appended, "db.seed") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.NON_BREAKING)
    edited = plan_for(state, config, {"db.seed": seed_model(csv_path, "id,name\n1,a\n2,CHANGED\n")})
    assert change(edited, "db.seed") == (ChangeType.DIRECTLY_MODIFIED, ChangeCategory.BREAKING)


def test_uses_the_project_dag_and_incremental_batch_size_and_lookback(state, config):
    models = project(o=make("db.orders", ORDERS, kind=Kind(KindName.INCREMENTAL_BY_TIME_RANGE,
                                                          time_column="ds", batch_size=10, lookback=2)))
    first = build_plan(project_models=models, dag=DAG.build(models),
                       rendered={n: normalized_query_sql(m) for n, m in models.items()}, state=state,
                       environment="prod", options=PlanOptions(), config=config, now_ms=NOW)
    assert [len(range(s, e, DAY)) for s, e in backfill(first, "db.orders").batches] == [10, 10, 10, 1]
    apply(state, first)
    later = plan_for(state, config, models, now=NOW + DAY)
    assert backfill(later, "db.orders").intervals == tuple(
        (to_ms(d), to_ms(d) + DAY) for d in ("2024-01-30", "2024-01-31", "2024-02-01"))


def test_dag_cycle_and_physical_schema_mapping(state, tmp_path):
    mapped = ProjectConfig(root=tmp_path, gateways={}, default_gateway="local",
                           model_defaults=ModelDefaults(start="2024-01-01"),
                           physical_schema_mapping={"db": "warehouse_phys"})
    plan = plan_for(state, mapped, project())
    assert plan.snapshots["db.orders"].table_name.startswith("warehouse_phys.db__orders__")
    cyclic = {"db.a": make("db.a", "SELECT x FROM db.b"), "db.b": make("db.b", "SELECT x FROM db.a")}
    with pytest.raises(ConfigError, match="cycle between models: db.a -> db.b -> db.a") as info:
        plan_for(state, mapped, cyclic)
    assert "models/a.sql" in str(info.value)


def test_peers_are_planned_in_name_order_after_their_parents(state, config):
    """Without a project DAG the plan follows the same order as one: parents first, peers by name."""
    models = {name: make(name, sql) for name, sql in (
        ("db.zeta", "SELECT 1 AS x FROM raw.z"), ("db.beta", "SELECT x FROM db.zeta"),
        ("db.alpha", "SELECT x FROM raw.a"), ("db.gamma", "SELECT x FROM db.alpha JOIN db.beta"))}
    plan = plan_for(state, config, models)
    expected = ["db.alpha", "db.zeta", "db.beta", "db.gamma"]
    assert list(plan.snapshots) == expected
    assert [c.name for c in plan.changes] == expected
    assert [b.snapshot_id.name for b in plan.backfills] == expected


def test_dev_skipped_backfill_is_filled_by_a_later_plan(state, config):
    apply(state, plan_for(state, config, project()))
    changed = project(o=make("db.orders", "SELECT id, amount, ds, 1 AS one FROM raw.orders", kind=INCR))
    skipped = plan_for(state, config, changed, env="dev", skip_backfill=True)
    apply(state, skipped)
    again = plan_for(state, config, changed, env="dev")
    assert [b.snapshot_id.name for b in again.backfills] == ["db.orders"]


def test_start_less_models_follow_sqlmesh(state, tmp_path):
    """Expected spans are what SQLMesh 0.236.4 planned for the same four models (execution 2026-11-22
    18:30 UTC): a start-less child takes its parent's start, a start-less root the previous cron tick."""
    no_default = ProjectConfig(root=tmp_path, gateways={}, default_gateway="local",
                               model_defaults=ModelDefaults())
    hourly = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    models = {m.name: m for m in (
        make("db.a", "SELECT 1 AS id, ds FROM raw.a", kind=INCR, start="2026-11-10"),
        make("db.b", "SELECT id, ds FROM db.a", kind=INCR),
        make("db.c", "SELECT 2 AS id, ds FROM raw.c", kind=INCR),
        make("db.h", "SELECT 3 AS id, ds FROM raw.h", kind=hourly, cron="@hourly"))}
    now = to_ms("2026-11-22 18:30:00")

    def spans(plan):
        return {b.snapshot_id.name: (b.intervals[0][0], b.intervals[-1][1]) for b in plan.backfills}

    prod = plan_for(state, no_default, models, now=now)
    assert spans(prod) == {"db.a": (to_ms("2026-11-10"), to_ms("2026-11-22")),
                           "db.b": (to_ms("2026-11-10"), to_ms("2026-11-22")),
                           "db.c": (to_ms("2026-11-21"), to_ms("2026-11-22")),
                           "db.h": (to_ms("2026-11-22 17:00:00"), to_ms("2026-11-22 18:00:00"))}
    assert prod.start == to_ms("2026-11-10")

    # --start later than the parent's start: the start-less child follows it (as SQLMesh);
    # the start-less root is backfilled from --start too, where SQLMesh keeps only yesterday (docs/coming-from-sqlmesh.md)
    dev = plan_for(state, no_default, models, env="dev", now=now, start="2026-11-15")
    assert spans(dev) == {"db.a": (to_ms("2026-11-15"), to_ms("2026-11-22")),
                          "db.b": (to_ms("2026-11-15"), to_ms("2026-11-22")),
                          "db.c": (to_ms("2026-11-15"), to_ms("2026-11-22")),
                          "db.h": (to_ms("2026-11-15"), to_ms("2026-11-22 18:00:00"))}


def test_relative_execution_time_is_read_once(tmp_path):
    """`--execution-time yesterday` is yesterday, not the day before (it was resolved twice)."""
    from bot.context import Context
    from bot.project.example import write_example

    write_example(tmp_path / "shop")
    before = to_ms("yesterday")
    plan = Context(tmp_path / "shop").plan("prod", options=PlanOptions(execution_time="yesterday"))
    assert plan.execution_time in {before, to_ms("yesterday")}
    assert plan.execution_time % DAY == 0


def test_dev_environment_expires_its_ttl_after_todays_midnight(state, config):
    """SQLMesh reads `environment_ttl` against now with whole-day phrases counted from midnight."""
    from bot.plan.evaluator import PlanEvaluator

    evaluator = PlanEvaluator(state=state, runner=None, models_for=None, environment_ttl="in 2 weeks")
    prod = plan_for(state, config, project())
    assert evaluator.environment_for(prod).expiration_ts is None
    dev = plan_for(state, config, project(), env="dev", include_unmodified=True)
    before = to_ms("today") + 14 * DAY
    expiration = evaluator.environment_for(dev).expiration_ts
    assert expiration in {before, to_ms("today") + 14 * DAY}


def test_a_relative_model_start_counts_from_the_wall_clock_not_the_execution_time(state, config):
    """SQLMesh 0.236.4 reads a model's `start '3 days ago'` with no relative base: on 2026-12-04 a plan as of
    2026-12-03 filled 2026-12-01 and 2026-12-02 (one batch), and one as of 2024-01-07 stopped ("Start date /
    time can't be greater than end date / time"); meshbot counts from the wall clock too (and fills nothing)."""
    relative = make("db.orders", ORDERS, kind=INCR, start="3 days ago")
    plan = plan_for(state, config, project(orders=relative), execution_time="2024-01-31")   # now: 2024-02-01 10:00
    assert backfill(plan, "db.orders").intervals == ((to_ms("2024-01-29"), to_ms("2024-01-30")),
                                                     (to_ms("2024-01-30"), to_ms("2024-01-31")))
    backdated = plan_for(state, config, project(orders=relative), execution_time="2024-01-10")
    assert backfill(backdated, "db.orders") is None or not backfill(backdated, "db.orders").intervals


def test_a_relative_model_end_counts_from_the_wall_clock_and_a_relative_end_flag_from_the_execution_time(
        state, config):
    """SQLMesh 0.236.4, on 2026-12-06, planned a daily model with `end '3 days ago'` as of 2026-11-20 and filled
    it up to 2026-11-19: the model's end counts from the wall clock (2026-12-03), capped by the execution time.
    A plan's own `--end '5 days ago'` counts from the execution time (its plan builder's relative base)."""
    ending = make("db.orders", ORDERS, kind=INCR, start="2024-01-10", end="3 days ago")
    plan = plan_for(state, config, project(orders=ending), execution_time="2024-01-20")   # now: 2024-02-01 10:00
    filled = backfill(plan, "db.orders").intervals
    assert (filled[0][0], filled[-1][1], len(filled)) == (to_ms("2024-01-10"), to_ms("2024-01-20"), 10)
    late = plan_for(state, config, project(orders=ending), now=to_ms("2024-01-16 08:00:00"),
                    execution_time="2024-01-20")
    assert backfill(late, "db.orders").intervals[-1] == (to_ms("2024-01-12"), to_ms("2024-01-13"))
    flagged = plan_for(state, config, project(), env="dev", execution_time="2024-01-20", end="5 days ago")
    assert backfill(flagged, "db.orders").intervals[-1] == (to_ms("2024-01-14"), to_ms("2024-01-15"))
