"""Preview a plan's changed models without writing anything: each new version's rows over a bounded
window as a query (a session-only temporary view when a changed child reads it), reading prod's tables
for unchanged parents and the earlier previews (same call, DAG order) for changed ones."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Mapping, Sequence

from sqlglot import exp

from bot.errors import BotError, ConfigError, PlanError
from bot.timeline.intervals import Interval
from bot.plan.definition import ChangeType, ModelChange, Plan
from bot.plan.execution import order_snapshots
from bot.plan.cron_run import model_start, query_sql
from bot.plan.parents import model_end
from bot.project.dag import children_of, reachable
from bot.project.model import KindName, Model
from bot.timeline.times import MS_PER_DAY
from bot.snapshot import ChangeCategory, Snapshot, view_name
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.materialize.common import conform_sources
from bot.spark.sql import parse_query, quote_table
from bot.spark.materialize.incremental_time import interval_condition, time_column
from bot.spark.materialize.seed import read_seed
from bot.spark.python_context import python_model_frame
from bot.state.protocol import StateReader

FULL_SCOPES = ("whole", "skip")
DIRECT = "directly modified"
BREAKING_CHILD = "breaking change upstream"
_BREAKING = (ChangeCategory.BREAKING, ChangeCategory.INDIRECT_BREAKING)
_SCD2 = (KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN)


@dataclass(frozen=True)
class PreviewScope:
    """How much of each model is compared: the last `window_days` days of intervals of
    INCREMENTAL_BY_TIME_RANGE models; for every other kind the whole query (`whole`) or nothing (`skip`)."""

    window_days: int = 7
    full_scope: str = "whole"

    def __post_init__(self) -> None:
        if self.window_days < 1:
            raise ConfigError(f"the preview window must be at least 1 day (got {self.window_days})")
        if self.full_scope not in FULL_SCOPES:
            raise ConfigError(f"the scope of FULL/VIEW models must be one of {', '.join(FULL_SCOPES)} "
                              f"(got `{self.full_scope}`)")


@dataclass(frozen=True)
class PreviewSide:
    """Rows to compare: a table or temporary view name, or a query over one; with its (name, type) columns."""

    relation: str | exp.Query
    columns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PreviewTarget:
    """One changed model to compare with prod: where prod's rows (base) and the PR's rows (change) are.

    `base`/`change` are None with a `note` saying why nothing is compared.
    `window` is None when the whole query/table is compared.
    """

    name: str
    kind: str
    reason: str                          # directly modified / breaking change upstream
    keys: tuple[str, ...] = ()
    key_source: str = ""                 # grain, unique_key or "" (no key)
    window: Interval | None = None
    base: PreviewSide | None = None
    change: PreviewSide | None = None
    previewed: bool = True               # False: the change side is the PR environment's own table
    note: str = ""
    queries: "PlanQueries | str | None" = None   # asked for (plan_queries=True): the queries, or why none


@dataclass(frozen=True)
class PlanQueries:
    """A directly modified SQL model's query in prod's version and in the PR's, over the preview's window
    (its whole query for other kinds), both reading the tables the preview reads: what plan regressions
    compare. `time_columns` are the model's time column and partitioned_by."""

    prod_sql: str
    pr_sql: str
    time_columns: tuple[str, ...] = ()


def diff_targets(plan: Plan) -> dict[str, str]:
    """Models of `plan` worth comparing with prod, with why: directly modified ones, and indirectly
    modified ones downstream of a breaking change. The latter include children that SQLMesh's rules
    call indirect non-breaking because a non-breaking change sits between them and the breaking one:
    their rows change all the same."""
    parents = {name: [p.name for p in snapshot.parents] for name, snapshot in plan.snapshots.items()}
    breaking = {c.name for c in plan.changes
                if c.change is ChangeType.DIRECTLY_MODIFIED and c.category is ChangeCategory.BREAKING}
    below_breaking = reachable(children_of(parents), breaking) if breaking else set()
    out: dict[str, str] = {}
    for change in plan.changes:
        if change.snapshot is None:
            continue
        if change.change is ChangeType.DIRECTLY_MODIFIED:
            out[change.name] = DIRECT
        elif change.change is ChangeType.INDIRECTLY_MODIFIED and (
                change.category in _BREAKING or change.name in below_breaking):
            out[change.name] = BREAKING_CHILD
    return out


@dataclass
class _Preview:
    engine: SparkEngine
    state: StateReader
    plan: Plan
    models_for: Callable[[Snapshot], Model]
    context_models: Mapping[str, Model]
    variables: Mapping[str, object]
    gateway: str
    default_start: str | None
    scope: PreviewScope
    environment_tables: Mapping[str, str] | None
    views: list[str]

    def __post_init__(self) -> None:
        prod = self.state.get_environment("prod")
        self.prod_tables = prod.tables() if prod else {}
        self.prod_versions = {s.name: s.version for s in prod.snapshots} if prod else {}
        self.mapping = {name: self.prod_tables.get(name, view_name(name, "prod"))
                        for name in self.context_models}
        self.execution_time = self.plan.execution_time
        self.tag = uuid.uuid4().hex[:10]

    # -- names and objects -----------------------------------------------------------------
    def _view(self, role: str) -> str:
        name = f"__meshbot_preview_{self.tag}_{len(self.views)}_{role}"
        self.views.append(name)
        return name

    def _relation(self, model: Model, view: str, mapping: Mapping[str, str], interval: Interval) -> None:
        """A temporary view of `model`'s rows for `interval` (SQL, Python or seed), reading `mapping`."""
        if model.kind.name is KindName.SEED:
            kind = replace(model.kind, seed_path=str(model.seed_abs_path)) if model.seed_abs_path else model.kind
            self.engine.register_temp_view(view, read_seed(self.engine, kind=kind, table=model.name,
                                                           columns=model.columns or None))
        elif model.is_python:
            try:
                with spark_errors(f"evaluating {model.name}"):
                    frame = python_model_frame(self.engine, model, mapping=mapping, start=interval[0],
                                               end=interval[1], execution_time=self.execution_time,
                                               variables=self.variables, gateway=self.gateway)
            except BotError:
                raise
            except Exception as exc:  # noqa: BLE001 - the model's own code failed: say so, keep diffing others
                raise PlanError(f"the Python model `{model.name}` failed: {type(exc).__name__}: {exc}") from None
            self.engine.register_temp_view(view, frame)
        else:
            self.engine.create_temp_view(view, self._query(model, mapping, interval))

    def _query(self, model: Model, mapping: Mapping[str, str], interval: Interval) -> str:
        """The model's rendered query for `interval`; with declared `columns`, renamed and cast to them
        as a backfill writes its table (so prod's declared types are not reported as changed)."""
        sql = query_sql(model=model, context_models=self.context_models, table_mapping=mapping,
                        interval=interval, execution_time=self.execution_time, variables=self.variables,
                        gateway=self.gateway)
        if not model.columns:
            return sql
        outputs = self.engine.schema_of(sql, subject=f"previewing {model.name}").names
        sources = conform_sources(outputs, model.columns)
        casts = [exp.alias_(exp.cast(exp.column(source, quoted=True),
                                     exp.DataType.build(data_type, dialect="spark")), name, quoted=True)
                 for source, (name, data_type) in zip(sources, model.columns)]
        query = parse_query(sql, f"previewing {model.name}").subquery("__meshbot_query")
        return exp.select(*casts).from_(query).sql(dialect="spark", identify=True)

    # -- scope -----------------------------------------------------------------------------
    def _range_end(self, model: Model) -> int:
        end = self.plan.end or self.execution_time
        model_stop = model_end(model)
        return end if model_stop is None else min(end, model_stop)

    def _start(self, model: Model) -> int:
        return model_start(model, default_start=self.default_start, execution_time=self.execution_time)

    def _window(self, name: str, model: Model) -> Interval:
        """The last `window_days` days ending where prod's recorded intervals end (else at the plan's end)."""
        version = self.prod_versions.get(name)
        recorded = self.state.get_intervals({(name, version)}).get((name, version)) if version else None
        ends = [end for _, end in recorded.intervals] if recorded and recorded.intervals else []
        if ends:
            end = max(ends)
        else:
            end = self._range_end(model)
            end -= end % MS_PER_DAY
        start = max(end - self.scope.window_days * MS_PER_DAY, min(self._start(model), end - MS_PER_DAY))
        return start, end

    # -- one model -------------------------------------------------------------------------
    def build(self, snapshot: Snapshot, change: ModelChange | None, reason: str | None, *,
              has_children: bool) -> PreviewTarget | None:
        """Preview one model (a temporary view of its whole range, when a previewed child reads it or its
        whole query is compared) and say what to compare; None for a model previewed only for its children."""
        name = snapshot.name
        model = self.models_for(snapshot)
        kind = model.kind.name
        own = {**self.mapping, name: self.prod_tables.get(name, self.mapping.get(name, name))}
        full = (self._start(model), max(self._range_end(model), self._start(model) + 1))
        previewable = kind not in (KindName.EXTERNAL, KindName.EMBEDDED) and kind not in _SCD2
        compares_whole = reason is not None and kind is not KindName.INCREMENTAL_BY_TIME_RANGE
        input_view = None
        if previewable and self.environment_tables is None and (has_children or compares_whole):
            input_view = self._view("input")
            self._relation(model, input_view, own, full)
            self.mapping[name] = input_view
        if reason is None:
            return None
        keys, source = ((model.grains, "grain") if model.grains
                        else (model.kind.unique_key, "unique_key") if model.kind.unique_key else ((), ""))
        target = PreviewTarget(name=name, kind=kind.value, reason=reason, keys=tuple(keys), key_source=source,
                               previewed=self.environment_tables is None)
        if kind in (KindName.EXTERNAL, KindName.EMBEDDED):
            return replace(target, note=f"not compared: {kind.value} models have no table of their own")
        if kind in _SCD2:
            return replace(target, note="not compared: an SCD type 2 table is the history of every past run, "
                                        "which a preview cannot rebuild")
        prod_table = self.prod_tables.get(name)
        if prod_table is None:
            return replace(target, note="not compared: the model is not in prod")
        change_rel = input_view
        if self.environment_tables is not None:
            change_rel = self.environment_tables.get(name)
            if change_rel is None:
                return replace(target, note="not compared: the model is not in the PR environment")
        if compares_whole:
            if self.scope.full_scope == "skip":
                return replace(target, note=f"not compared: `table_diff_full_scope` is `skip` for "
                                            f"{kind.value} models")
            return replace(target, base=self._side(prod_table), change=self._side(change_rel))
        window = self._window(name, model)
        prod_model = self.models_for(change.previous) if change and change.previous else model
        base = self._windowed(prod_model, prod_table, self.engine.dtypes(prod_table), window)
        if change_rel is not None:       # the PR environment's table
            return replace(target, window=window, base=base, change=self._windowed(
                model, change_rel, self.engine.dtypes(change_rel), window))
        return replace(target, window=window, base=base, change=self._window_rows(model, own, window))

    def plan_queries(self, snapshot: Snapshot, change: ModelChange | None,
                     window: Interval | None) -> PlanQueries | None:
        """Both versions' SQL reading the same tables: changed parents' previews (a backfilled PR environment's
        tables), prod's for the rest and the model itself; over `window`, else the whole query. None for a
        model without a SQL query (Python, seed, external, embedded) in either version."""
        name = snapshot.name
        model = self.models_for(snapshot)
        if change is None or change.previous is None:
            raise PlanError("the model is not in prod")
        prod_model = self.models_for(change.previous)
        if any(m.is_python or m.kind.name in (KindName.SEED, KindName.EXTERNAL, KindName.EMBEDDED)
               for m in (model, prod_model)):
            return None
        # a backfilled PR environment's tables stand for the changed parents' previews
        own = {**self.mapping, **(self.environment_tables or {}), name: self.prod_tables.get(name, name)}
        full = (self._start(model), max(self._range_end(model), self._start(model) + 1))

        def sql(version: Model) -> str:
            if window is None:
                return self._query(version, own, full)
            text = self._query(version, own, window)
            columns = self.engine.query_dtypes(text, subject=f"previewing {name}")
            query = parse_query(text, f"previewing {name}").subquery("__meshbot_rows")
            relation = self._windowed(version, query, columns, window).relation
            return relation if isinstance(relation, str) else relation.sql(dialect="spark", identify=True)

        columns = tuple(dict.fromkeys(c for c in (model.kind.time_column or "", *model.partitioned_by) if c))
        return PlanQueries(prod_sql=sql(prod_model), pr_sql=sql(model), time_columns=columns)

    def _side(self, table: str) -> PreviewSide:
        return PreviewSide(table, tuple(self.engine.dtypes(table)))

    def _window_rows(self, model: Model, mapping: Mapping[str, str], window: Interval) -> PreviewSide:
        """A temporary view of the new version's rows for `window`, filtered on the time column the way a
        backfill writes them (one view for a SQL model: its query analyzed once, then wrapped)."""
        if model.is_python or model.kind.name is KindName.SEED:
            rows = self._view("rows")
            self._relation(model, rows, mapping, window)
            return self._windowed(model, rows, self.engine.dtypes(rows), window)
        sql = self._query(model, mapping, window)
        columns = self.engine.query_dtypes(sql, subject=f"previewing {model.name}")
        query = parse_query(sql, f"previewing {model.name}").subquery("__meshbot_rows")
        return self._windowed(model, query, columns, window)

    def _windowed(self, model: Model, relation: str | exp.Expression, columns: Sequence[tuple[str, str]],
                  window: Interval) -> PreviewSide:
        """A query over `relation` (a table, view or subquery) restricted to `window`: no catalog object."""
        column, data_type = time_column(model.kind, columns, table=model.name)
        condition = interval_condition(column, data_type, fmt=model.kind.time_column_format,
                                       start=window[0], end=window[1])
        source = (relation if isinstance(relation, exp.Expression)
                  else exp.to_table(quote_table(relation), dialect="spark"))
        select = exp.select(exp.Star()).from_(source).where(condition)
        return PreviewSide(select, tuple(columns))


@contextlib.contextmanager
def preview_relations(*, engine: SparkEngine, state: StateReader, plan: Plan,
                      models_for: Callable[[Snapshot], Model], context_models: Mapping[str, Model],
                      variables: Mapping[str, object], gateway: str, default_start: str | None = None,
                      scope: PreviewScope = PreviewScope(),
                      environment_tables: Mapping[str, str] | None = None,
                      plan_queries: bool = False) -> Iterator[list[PreviewTarget]]:
    """Yield a PreviewTarget per model of `diff_targets(plan)`, parents first; drop every temporary
    view on exit. With `environment_tables` (a backfilled PR environment's tables) the change side reads
    those tables over the same window instead of previews. With `plan_queries`, each directly modified
    model's target carries its PlanQueries (or why it has none)."""
    reasons = diff_targets(plan)
    changes = {c.name: c for c in plan.changes}
    needed = {name for name in reasons}
    needed |= {c.name for c in plan.changes if c.change is ChangeType.ADDED and c.snapshot is not None}
    snapshots = [plan.snapshots[name] for name in needed if name in plan.snapshots]
    parents = {parent.name for snapshot in snapshots for parent in snapshot.parents}
    preview = _Preview(engine=engine, state=state, plan=plan, models_for=models_for,
                       context_models=context_models, variables=variables, gateway=gateway,
                       default_start=default_start, scope=scope, environment_tables=environment_tables,
                       views=[])
    targets: list[PreviewTarget] = []
    failed: dict[str, str] = {}
    try:
        for snapshot in order_snapshots(snapshots):
            name, reason = snapshot.name, reasons.get(snapshot.name)
            broken = sorted(p.name for p in snapshot.parents if p.name in failed)
            try:
                if broken:
                    raise _ParentFailed(f"its changed parent `{broken[0]}` could not be previewed")
                target = preview.build(snapshot, changes.get(name), reason, has_children=name in parents)
            except (BotError, _ParentFailed) as error:
                failed[name] = str(error)
                if reason:
                    targets.append(PreviewTarget(name=name, kind=snapshot.kind, reason=reason,
                                                 note=f"not compared: {error}",
                                                 queries=f"not compared: {error}"
                                                 if plan_queries and reason == DIRECT else None))
                continue
            if target is not None and plan_queries and reason == DIRECT:
                target = replace(target, queries=_queries(preview, snapshot, changes.get(name), target))
            if target is not None:
                targets.append(target)
        yield targets
    finally:
        for view in reversed(preview.views):
            with contextlib.suppress(BotError):
                engine.drop_temp_view(view)


class _ParentFailed(Exception):
    pass


def _queries(preview: _Preview, snapshot: Snapshot, change: ModelChange | None,
             target: PreviewTarget) -> PlanQueries | str | None:
    try:
        return preview.plan_queries(snapshot, change, target.window)
    except BotError as error:
        return f"not compared: {error}"
