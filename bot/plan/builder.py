"""Diff the local project against an environment and build the frozen Plan."""

from __future__ import annotations

import csv
import uuid
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from bot.errors import PlanError
from bot.fingerprint import HashCache, fingerprint_models
from bot.plan.backfill import BackfillInputs, plan_backfills, restated_models
from bot.plan.categorize import categorize, categorize_seed, indirect_category
from bot.plan.columns import check_columns
from bot.plan.destructive import check_destructive
from bot.plan.definition import ChangeType, ModelChange, Plan, PlanOptions
from bot.plan.query_diff import source_diff, unified_diff
from bot.plan.snapshot_models import model_definition
from bot.project.cache import paused_gc
from bot.project.config import ProjectConfig
from bot.project.dag import DAG
from bot.timeline.times import now_ms as wall_clock_ms
from bot.project.model import KindName, Model
from bot.project.output_columns import expand_star, projection_names
from bot.project.seed_csv import check_seed
from bot.project.windows import check_ordered_windows
from bot.project.sqltext import selects_star
from bot.snapshot import (ChangeCategory, Fingerprint, Snapshot, SnapshotId, normalize_environment,
                          physical_schema_name)
from bot.state.protocol import Environment, StateReader



@dataclass(frozen=True)
class _Diff:
    """The inputs every per-model decision needs."""

    models: Mapping[str, Model]
    rendered: Mapping[str, str]
    fingerprints: Mapping[str, Fingerprint]
    previous: Mapping[str, Snapshot]            # the base environment's snapshot per model name
    stored: Mapping[SnapshotId, Snapshot]
    options: PlanOptions
    config: ProjectConfig
    now_ms: int


def build_plan(
    *,
    project_models: Mapping[str, Model],
    dag: DAG | None = None,
    rendered: Mapping[str, str],
    state: StateReader,
    environment: str,
    options: PlanOptions,
    config: ProjectConfig,
    now_ms: int,
    hash_cache: HashCache | None = None,
) -> Plan:
    """The plan that brings `environment` to the project's models; never starts Spark.

    `dag` is the project's graph when the caller has it (built from `project_models` otherwise).
    `rendered` maps model names to their reference-rendered Spark SQL. `hash_cache` holds the models'
    own hashes from earlier plans (the caller saves it).

    Runs without GC passes: the plan makes a few objects per model (state rows, snapshots, intervals)
    and little cyclic garbage, and at 10,000 models full collections over them were ~25% of a warm plan.
    """
    with paused_gc():
        return _build_plan(project_models=project_models, dag=dag, rendered=rendered, state=state,
                           environment=environment, options=options, config=config, now_ms=now_ms,
                           hash_cache=hash_cache)


def _check_seeds(models: Mapping[str, Model], snapshots: Mapping[str, Snapshot], backfills: Sequence[Any]) -> None:
    """The CSV of every seed this plan loads fits its model's `columns` (bot.project.seed_csv), before Spark starts."""
    by_id = {s.snapshot_id: s.name for s in snapshots.values()}
    for backfill in backfills:
        model = models.get(by_id.get(backfill.snapshot_id, ""))
        if model is not None and model.kind.name is KindName.SEED and model.seed_abs_path is not None:
            check_seed(model_name=model.name, model_path=model.path, model_line=model.line,
                       csv_path=model.seed_abs_path, settings=model.kind.csv_settings, columns=model.columns)


def _build_plan(*, project_models: Mapping[str, Model], dag: DAG | None, rendered: Mapping[str, str],
                state: StateReader, environment: str, options: PlanOptions, config: ProjectConfig,
                now_ms: int, hash_cache: HashCache | None) -> Plan:
    env_name = normalize_environment(environment)
    target = state.get_environment(env_name)
    prod = target if env_name == "prod" else state.get_environment("prod")
    base = target if target is not None else (prod if env_name != "prod" else None)
    graph = dag if dag is not None and set(dag.order) == set(project_models) else DAG.build(project_models)
    order = graph.order
    check_columns(project_models, rendered, strict=config.strict)
    check_ordered_windows(project_models, rendered)
    fingerprints = fingerprint_models(project_models, order, rendered, cache=hash_cache, parents=graph.parents)
    previous, stored = _stored_snapshots(state, base, fingerprints)
    _check_removed(project_models, previous)
    ctx = _Diff(models=project_models, rendered=rendered, fingerprints=fingerprints,
                previous=previous, stored=stored, options=options, config=config, now_ms=now_ms)
    snapshots, new_snapshots, changes = _diff_models(ctx, order)
    changes += tuple(ModelChange(name=name, change=ChangeType.REMOVED, category=None,
                                 kind=previous[name].kind, snapshot=None, previous=previous[name])
                     for name in sorted(previous.keys() - project_models.keys()))
    changes = _with_children(changes, graph)
    restated = restated_models(project_models, options.restate_models, dag=graph)
    if not changes and not restated:
        _check_nothing_to_do(env_name, new=target is None, options=options, config=config)
    warnings = check_destructive(
        changes=[(c.name, c.previous, c.snapshot) for c in changes
                 if c.previous is not None and c.snapshot is not None],
        models=project_models, rendered=rendered, allowed=options.allow_destructive_models)
    backfills, restatements, start, end, execution = plan_backfills(BackfillInputs(
        models=project_models, snapshots=snapshots, changes=changes, previous=previous,
        prod=prod, is_dev=env_name != "prod", restated=restated, options=options,
        config=config, now_ms=now_ms, state=state, dag=graph))
    _check_seeds(project_models, snapshots, backfills)
    return Plan(plan_id=uuid.uuid4().hex, environment=env_name, new_environment=target is None,
                expected_plan_id=target.plan_id if target else None,
                previous_environment=target, snapshots=snapshots,
                new_snapshots=tuple(new_snapshots), changes=changes, backfills=backfills,
                restatements=restatements, options=options, start=start, end=end,
                execution_time=execution, warnings=warnings,
                audit_only=audit_only_snapshots(project_models, snapshots, previous, backfills),
                promoted=promoted_models(env_name, snapshots, target=target, base=base,
                                         include_unmodified=options.include_unmodified or config.include_unmodified),
                before_all=tuple(config.before_all), after_all=tuple(config.after_all))


def _stored_snapshots(state: StateReader, base: Environment | None, fingerprints: Mapping[str, Fingerprint]
                      ) -> tuple[dict[str, Snapshot], dict[SnapshotId, Snapshot]]:
    """(the base environment's snapshot per model name, every snapshot the plan may reuse by id).

    An unchanged model (its identifier the one the environment lists) keeps the snapshot the
    environment lists, its row read only if used; the rows of the other listed snapshots and of the
    changed models' new identifiers (another environment may have stored them) are read now.
    """
    listed = base.snapshots if base is not None else ()
    kept = {s.name for s in listed if (fp := fingerprints.get(s.name)) is not None and fp.identifier == s.identifier}
    stored = state.listed_snapshots(s for s in listed if s.name in kept)
    kept_by_name = {snapshot.name: snapshot for snapshot in stored.values()}
    wanted = {s.snapshot_id for s in listed if s.name not in kept}
    wanted |= {SnapshotId(name, fp.identifier) for name, fp in fingerprints.items() if name not in kept}
    stored.update(state.get_snapshots(wanted))
    previous = {}
    for s in listed:
        found = kept_by_name[s.name] if s.name in kept else stored.get(s.snapshot_id)
        if found is not None:
            previous[s.name] = found
    return previous, stored


def promoted_models(env_name: str, snapshots: Mapping[str, Snapshot], *, target: Environment | None,
                    base: Environment | None, include_unmodified: bool) -> frozenset[str] | None:
    """The models a dev environment holds views for (None: all, as prod and `include_unmodified`).

    As SQLMesh: those the environment promoted before (still in the project), and those whose snapshot
    differs from the environment's previous one (from prod's when the environment is new), directly
    or indirectly modified; the others are read from their tables.
    """
    if env_name == "prod" or include_unmodified:
        return None
    before = {s.name: s.identifier for s in base.snapshots} if base is not None else {}
    kept = {s.name for s in target.snapshots if s.promoted and s.name in snapshots} if target is not None else set()
    return frozenset(kept | {name for name, s in snapshots.items() if before.get(name) != s.identifier})


def audit_only_snapshots(models: Mapping[str, Model], snapshots: Mapping[str, Snapshot],
                         previous: Mapping[str, Snapshot], backfills: Sequence[Any]) -> tuple[SnapshotId, ...]:
    """Snapshots whose audits changed (a metadata change) and that keep a table this plan does not
    backfill: their audits must still run on that table's data before promotion.

    SQLMesh does this only for pure metadata changes; here an audit added together with an indirect
    non-breaking change is audited too, since no backfill would run it either.
    """
    filled = {b.snapshot_id for b in backfills}
    picked = []
    audited = sorted(name for name in snapshots if (model := models.get(name)) is not None and model.audits)
    for name in audited:
        snapshot, prev, model = snapshots[name], previous.get(name), models[name]
        if prev is None or snapshot.snapshot_id in filled:
            continue
        if prev.version != snapshot.version or not model.kind.name.is_materialized:
            continue
        if prev.definition.get("audits") != model_definition(model).get("audits"):
            picked.append(snapshot.snapshot_id)
    return tuple(picked)


def _check_removed(models: Mapping[str, Model], previous: Mapping[str, Snapshot]) -> None:
    removed = {name for name in previous if name not in models}
    if not removed:
        return
    for name, model in sorted(models.items()):
        for parent in sorted(model.depends_on & removed):
            raise PlanError(f"model `{parent}` was removed but `{name}` ({model.path}) still "
                            f"references it; remove the reference or restore `{parent}`")


def _check_nothing_to_do(env: str, *, new: bool, options: PlanOptions, config: ProjectConfig) -> None:
    if env != "prod" and new and not (options.include_unmodified or config.include_unmodified):
        raise PlanError(f"project files match `prod`; nothing to plan for `{env}` "
                        "(use --include-unmodified to create the environment anyway)")


def _diff_models(ctx: _Diff, order: Sequence[str]) -> tuple[dict[str, Snapshot], list[Snapshot],
                                                            tuple[ModelChange, ...]]:
    snapshots: dict[str, Snapshot] = {}
    new_snapshots: list[Snapshot] = []
    changes: list[ModelChange] = []
    categories: dict[str, ChangeCategory] = {}
    for name in order:
        fp = ctx.fingerprints[name]
        prev = ctx.previous.get(name)
        if prev is not None and prev.identifier == fp.identifier:
            snapshots[name] = prev
            continue
        existing = ctx.stored.get(SnapshotId(name, fp.identifier))
        change = _classify(ctx, name, prev=prev, categories=categories, existing=existing)
        snapshot = existing or _new_snapshot(ctx, name, category=change.category, prev=prev,
                                                snapshots=snapshots)
        if existing is None:
            new_snapshots.append(snapshot)
        snapshots[name] = snapshot
        categories[name] = change.category
        if change.type is ChangeType.INDIRECTLY_MODIFIED and change.category is ChangeCategory.METADATA:
            continue   # only upstream metadata changed: a new snapshot on the same table, not a change
        changes.append(ModelChange(name=name, change=change.type, category=change.category,
                                   kind=snapshot.kind, snapshot=snapshot, previous=prev,
                                   diff=change.diff))
    return snapshots, new_snapshots, tuple(changes)


@dataclass(frozen=True)
class _Change:
    type: ChangeType
    category: ChangeCategory
    diff: str = ""


def _classify(ctx: _Diff, name: str, *, prev: Snapshot | None,
              categories: Mapping[str, ChangeCategory], existing: Snapshot | None) -> _Change:
    fp, model = ctx.fingerprints[name], ctx.models[name]
    if prev is None:
        return _Change(ChangeType.ADDED, ChangeCategory.BREAKING)
    if fp.data_hash != prev.fingerprint.data_hash:
        diff = (source_diff(prev, model, name)
                or unified_diff(prev.rendered_query, ctx.rendered.get(name, ""), name))
        if existing is not None and existing.change_category is not None:
            return _Change(ChangeType.DIRECTLY_MODIFIED, existing.change_category, diff)
        return _Change(ChangeType.DIRECTLY_MODIFIED, _direct_category(ctx, model, prev), diff)
    if (fp.parent_data_hash, fp.parent_metadata_hash) == (prev.fingerprint.parent_data_hash,
                                                          prev.fingerprint.parent_metadata_hash):
        return _Change(ChangeType.METADATA_UPDATED, ChangeCategory.METADATA)
    star = _star_change(ctx, name, prev=prev, categories=categories)
    if star is not None:
        return star
    upstream = [categories[p] for p in model.depends_on if p in categories]
    if not upstream and fp.parent_data_hash != prev.fingerprint.parent_data_hash:
        upstream = [ChangeCategory.BREAKING]
    category = indirect_category(upstream)
    if _forward_only(ctx, model) and category.needs_new_version:
        category = ChangeCategory.FORWARD_ONLY
    return _Change(ChangeType.INDIRECTLY_MODIFIED, category)


def _forward_only(ctx: _Diff, model: Model) -> bool:
    return ctx.options.forward_only or model.kind.forward_only


def _direct_category(ctx: _Diff, model: Model, prev: Snapshot) -> ChangeCategory:
    if model.kind.name.value != prev.kind:
        return ChangeCategory.BREAKING
    if _forward_only(ctx, model):
        return ChangeCategory.FORWARD_ONLY
    if ctx.config.auto_categorize_changes == "off":
        return ChangeCategory.BREAKING
    if model.kind.name is KindName.SEED:
        return _seed_category(model, prev)
    if model.query is None or not prev.rendered_query:
        return ChangeCategory.BREAKING
    return categorize(prev.rendered_query, ctx.rendered.get(model.name, "")) or ChangeCategory.BREAKING


def _seed_category(model: Model, prev: Snapshot) -> ChangeCategory:
    """Seeds compare CSV text when the old snapshot kept it; otherwise a change is breaking."""
    old_text = prev.definition.get("seed_content")
    if not isinstance(old_text, str) or model.seed_abs_path is None:
        return ChangeCategory.BREAKING
    try:
        new_rows = list(csv.reader(model.seed_abs_path.read_text(encoding="utf-8").splitlines()))
    except OSError:
        return ChangeCategory.BREAKING
    old_rows = list(csv.reader(old_text.splitlines()))
    if not old_rows or not new_rows:
        return ChangeCategory.BREAKING
    return categorize_seed(old_rows[0], new_rows[0], old_rows=old_rows[1:], new_rows=new_rows[1:])


def _star_change(ctx: _Diff, name: str, *, prev: Snapshot,
                 categories: Mapping[str, ChangeCategory]) -> _Change | None:
    """A child selecting `*` from a parent whose columns changed is categorized on its expanded query."""
    model = ctx.models[name]
    if model.query is None or not selects_star(model.query):
        return None
    old_cols: dict[str, list[str]] = {}
    new_cols: dict[str, list[str]] = {}
    for parent in sorted(model.depends_on):
        if parent not in categories or parent not in ctx.models:
            continue
        parent_prev = ctx.previous.get(parent)
        old = _columns_of(parent_prev.rendered_query, parent_prev.columns) if parent_prev else None
        new = _columns_of(ctx.rendered.get(parent, ""), ctx.models[parent].columns)
        if old is None or new is None:
            continue
        old_cols[parent], new_cols[parent] = old, new
    if old_cols == new_cols:
        return None
    old_sql = expand_star(prev.rendered_query, old_cols)
    new_sql = expand_star(ctx.rendered.get(name, ""), new_cols)
    if old_sql is None or new_sql is None:
        return _Change(ChangeType.INDIRECTLY_MODIFIED, ChangeCategory.INDIRECT_BREAKING)
    category = categorize(old_sql, new_sql) or ChangeCategory.BREAKING
    if _forward_only(ctx, model):
        category = ChangeCategory.FORWARD_ONLY
    diff = source_diff(prev, model, name) or unified_diff(old_sql, new_sql, name)
    return _Change(ChangeType.DIRECTLY_MODIFIED, category, diff)


def _columns_of(sql: str, declared: Sequence[tuple[str, str]]) -> list[str] | None:
    if declared:
        return [c for c, _ in declared]
    return projection_names(sql) if sql else None


def _new_snapshot(ctx: _Diff, name: str, *, category: ChangeCategory, prev: Snapshot | None,
                  snapshots: Mapping[str, Snapshot]) -> Snapshot:
    model, fp = ctx.models[name], ctx.fingerprints[name]
    version = fp.data_version
    if prev is not None and not category.needs_new_version:
        version = prev.version
    return Snapshot(
        name=name, fingerprint=fp, version=version,
        kind=model.kind.name.value, definition=model_definition(model),
        rendered_query=ctx.rendered.get(name, ""), change_category=category,
        parents=tuple(snapshots[p].snapshot_id for p in sorted(model.depends_on) if p in snapshots),
        forward_only=category is ChangeCategory.FORWARD_ONLY,
        physical_schema=physical_schema_name(name, ctx.config.physical_schema_mapping),
        created_ts=wall_clock_ms(), updated_ts=wall_clock_ms(), ttl=ctx.config.snapshot_ttl,
        columns=model.columns)


def _with_children(changes: tuple[ModelChange, ...], dag: DAG) -> tuple[ModelChange, ...]:
    """Attach to each directly modified model its indirectly modified descendants."""
    indirect = {c.name for c in changes if c.change is ChangeType.INDIRECTLY_MODIFIED}
    return tuple(_replace_children(c, tuple(sorted(dag.downstream([c.name]) & indirect)))
                 if c.change is ChangeType.DIRECTLY_MODIFIED else c for c in changes)


def _replace_children(change: ModelChange, children: tuple[str, ...]) -> ModelChange:
    return replace(change, indirect_children=children)
