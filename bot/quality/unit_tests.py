"""Run unit tests: inputs become temporary views, the model runs against them on Spark, rows are compared."""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from sqlglot import exp

from bot.errors import ConfigError, EngineError
from bot.project.model import Model
from bot.project.render import render_query
from bot.timeline.times import MS_PER_DAY, exclusive_end_ms, to_datetime, to_ms
from bot.quality.results import TestResult, TestSuiteResult
from bot.quality.compare import compare_rows, describe
from bot.quality.unit_test_files import TestData, UnitTest, load_test_files
from bot.spark.casts import fitting_cast_sql, guarded_sql, is_checked
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.python_context import ExecutionContext, python_model_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


TestModelContext = ExecutionContext   # `context` of a Python model under test: inputs are views


def run_tests(*, project: Any, engine: SparkEngine, patterns: Sequence[str] = (),
              files: Sequence[str | Path] = ()) -> TestSuiteResult:
    """Run the project's unit tests (all of them, or those in `files`) whose name matches `patterns`.

    `project` is a bot.project.loader.Project (uses root, test_files, models, config.variables).
    A pattern with `*?[` is a glob on the test name, otherwise a substring. All tests share `engine`.
    Raises ConfigError for a malformed test file; a failing test is a result, not an exception.
    """
    began = time.perf_counter()
    paths = _test_paths(project, files)
    tests = [t for t in load_test_files(paths, project.config.model_defaults.catalogs) if selected(t.name, patterns)]
    variables = dict(getattr(project.config, "variables", {}) or {})
    results = tuple(run_test(t, engine=engine, models=project.models, variables=variables)
                    for t in tests)
    return TestSuiteResult(results=results, seconds=time.perf_counter() - began)


def _test_paths(project: Any, files: Sequence[str | Path]) -> list[Path]:
    if not files:
        return list(project.test_files)
    paths = []
    for item in files:
        path = Path(item)
        path = path if path.is_absolute() else Path(project.root) / path
        if not path.is_file():
            raise ConfigError("unit test file not found", path=path)
        paths.append(path)
    return paths


def selected(name: str, patterns: Sequence[str]) -> bool:
    """`-k` matching: any pattern matches (glob when it has wildcards, else substring).

    >>> selected("test_orders_total", ["orders"]), selected("test_a", ["test_?"]), selected("x", ["y*"])
    (True, True, False)
    """
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(name, p) if any(ch in p for ch in "*?[") else p in name
               for p in patterns)


def run_test(test: UnitTest, *, engine: SparkEngine, models: Mapping[str, Model],
             variables: Mapping[str, Any] | None = None) -> TestResult:
    """Run one test; Spark errors while running the model become a failed result."""
    began = time.perf_counter()
    model = models.get(test.model)
    if model is None:
        raise ConfigError(f"test `{test.name}`: unknown model `{test.model}`", path=test.path,
                          line=test.line)
    if model.variables is not None and test.variables:   # a test's `vars` win over its repository's too
        model = replace(model, variables={**model.variables, **test.variables})
    views: list[str] = []
    try:
        mapping = _create_inputs(test, engine=engine, models=models, views=views)
        outcome = _check_outputs(test, model, engine=engine, models=models, mapping=mapping,
                                 variables={**(variables or {}), **test.variables})
    except (EngineError, ConfigError) as error:
        if isinstance(error, ConfigError) and error.location is not None:
            raise
        outcome = (False, f"error: {error}", (), ())
    finally:
        for view in views:
            engine.drop_temp_view(view)
    passed, details, expected, actual = outcome
    header = f"{test.name} ({test.path}:{test.line}) on model {test.model}"
    return TestResult(name=test.name, file=test.path, model=test.model, passed=passed,
                      message="" if passed else f"{header}: {details}", expected_rows=expected,
                      actual_rows=actual, seconds=time.perf_counter() - began)


def _create_inputs(test: UnitTest, *, engine: SparkEngine, models: Mapping[str, Model],
                   views: list[str]) -> dict[str, str]:
    """One temporary view per input; returns {upstream model name: view name}."""
    mapping: dict[str, str] = {}
    for index, (name, data) in enumerate(test.inputs):
        view = f"__meshbot_test_{index}_{re.sub(r'[^a-zA-Z0-9_]', '_', name)}"
        upstream = models.get(name)
        declared = tuple(upstream.columns) if upstream is not None else ()
        _check_known_columns(data, declared, name=name)
        sql = input_sql(data, declared, test=test, name=name)
        rows = engine.dataframe(sql, subject=f"creating input `{name}` of test {test.name}")
        engine.register_temp_view(view, rows)
        views.append(view)
        mapping[name] = view
    return mapping


def _check_known_columns(data: TestData, declared: Sequence[tuple[str, str]], *, name: str) -> None:
    """Rows naming a column the upstream model declares no such column for fail the test, as in SQLMesh
    (which fails them whenever it knows every column's type; meshbot knows that of declared columns)."""
    if not declared or data.query is not None:
        return
    known = {column.lower() for column, _ in declared}
    unknown = [column for column in data.columns if column.lower() not in known]
    if unknown:   # no location: a failed test, not a project error
        raise ConfigError(f"input `{name}`: detected unknown column(s) {', '.join(unknown)} "
                          f"(expected column(s): {', '.join(column for column, _ in declared)})")


def input_sql(data: TestData, declared: Sequence[tuple[str, str]], *, test: UnitTest, name: str) -> str:
    """A SELECT producing the input rows, cast to the upstream model's declared column types."""
    if data.query is not None:
        return data.query
    types = {c.lower(): t for c, t in declared}
    columns = list(dict.fromkeys([c for c, _ in declared] + list(data.columns)))
    if not columns:
        raise ConfigError(f"test `{test.name}`: input `{name}` has no rows and its model declares no "
                          f"columns", path=test.path, line=test.line)
    kinds = [types.get(c.lower()) or infer_type([row.get(c) for row in data.rows]) for c in columns]
    built = [exp.DataType.build(k, dialect="spark") if k else None for k in kinds]
    rows = data.rows or ({},)
    # A value that may not fit its column is cast with try_cast in the rows and checked against its text
    # outside them (an inline table cannot fail), so a bad value fails the test instead of reading as NULL
    checked = {c for c, t in zip(columns, built) if t is not None and is_checked(t.sql(dialect="spark"))}
    raw = {c: f"__raw_{i}" for i, c in enumerate(columns) if c in checked}
    values = exp.Values(expressions=[
        exp.Tuple(expressions=[*(typed_literal(row.get(c), t) for c, t in zip(columns, built)),
                               *(exp.cast(literal(row.get(c)), "STRING") for c in columns if c in checked)])
        for row in rows])
    values.set("alias", exp.TableAlias(this=exp.to_identifier("__rows"), columns=[
        exp.to_identifier(c, quoted=True) for c in [*columns, *raw.values()]]))
    select = exp.select(*(
        exp.alias_(exp.maybe_parse(guarded_sql(_quoted(c), _quoted(raw[c]), c, t.sql(dialect="spark")),
                                   dialect="spark"), c, quoted=True) if c in checked
        else exp.column(c, quoted=True) for c, t in zip(columns, built))).from_(values)
    if not data.rows:
        select = select.where(exp.false())
    return select.sql(dialect="spark", identify=True)


def typed_literal(value: Any, kind: exp.DataType | None) -> exp.Expression:
    """A YAML value as type `kind`: NULL where it does not fit (text in a number column, a number beyond its
    range, a date that is not one), never a wrapped or truncated value; input_sql fails the test then."""
    if kind is None:
        return literal(value)
    target = kind.sql(dialect="spark")
    source_type = _LITERAL_TYPES.get(type(value))
    if value is None or source_type is None or not is_checked(target):
        return exp.cast(literal(value), kind)
    cast = fitting_cast_sql(literal(value).sql(dialect="spark"), source_type, target)
    return exp.cast(exp.maybe_parse(cast, dialect="spark"), kind)


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="spark")


_LITERAL_TYPES = {str: "string", int: "bigint", float: "double", Decimal: "decimal(38,18)", bool: "boolean",
                  date: "date", datetime: "timestamp"}


def infer_type(values: Sequence[Any]) -> str | None:
    """A Spark type for an undeclared input column when its YAML values need one, else None.

    >>> infer_type([1, 2.5]), infer_type([None, "2024-01-01", date(2024, 1, 2)]), infer_type([1, 2])
    ('DOUBLE', 'DATE', None)
    """
    present = [v for v in values if v is not None]
    if not present:
        return "STRING"
    if any(isinstance(v, datetime) for v in present):
        return "TIMESTAMP"
    if any(isinstance(v, date) for v in present):
        return "DATE"
    if any(isinstance(v, float) for v in present) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    return None


def literal(value: Any) -> exp.Expression:
    """A YAML value as a Spark SQL literal (floats as DOUBLE, dates and timestamps as casts)."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float):
        return exp.cast(exp.Literal.number(repr(value)), "DOUBLE")
    if isinstance(value, (int, Decimal)):
        return exp.Literal.number(str(value))
    if isinstance(value, datetime):
        return exp.cast(exp.Literal.string(value.replace(tzinfo=None).isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, (list, tuple)):
        return exp.Array(expressions=[literal(v) for v in value])
    if isinstance(value, dict):
        args: list[exp.Expression] = []
        for key, item in value.items():
            args += [exp.Literal.string(str(key)), literal(item)]
        return exp.Anonymous(this="NAMED_STRUCT", expressions=args)
    return exp.Literal.string(str(value))


def interval(test: UnitTest) -> tuple[int, int, int | None]:
    """(start ms, exclusive end ms, execution time ms or None); a date-only end covers its whole day."""
    start = to_ms(test.start) if test.start is not None else 0
    if test.end is None:
        end = start + MS_PER_DAY if test.start is not None else MS_PER_DAY
    else:
        end = exclusive_end_ms(test.end)
    execution = to_ms(test.execution_time) if test.execution_time is not None else None
    return start, end, execution


def freeze_time(query: exp.Expression, execution_time: int) -> exp.Expression:
    """CURRENT_DATE / CURRENT_TIMESTAMP / NOW() become literals of the execution time."""
    moment = to_datetime(execution_time).replace(tzinfo=None)

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.CurrentDate):
            return exp.cast(exp.Literal.string(moment.date().isoformat()), "DATE")
        if isinstance(node, exp.CurrentTimestamp) or (
                isinstance(node, exp.Anonymous) and node.name.lower() == "now" and not node.expressions):
            return exp.cast(exp.Literal.string(moment.isoformat(sep=" ")), "TIMESTAMP")
        return node

    return query.transform(replace)


def _check_outputs(test: UnitTest, model: Model, *, engine: SparkEngine,
                   models: Mapping[str, Model], mapping: Mapping[str, str],
                   variables: Mapping[str, Any]) -> tuple[bool, str, tuple, tuple]:
    start, end, execution = interval(test)
    if model.is_python:
        if test.ctes:
            raise ConfigError(f"test `{test.name}`: `outputs.ctes` needs a SQL model", path=test.path,
                              line=test.line)
        with spark_errors(f"running Python model {model.name}"):
            frame = python_model_frame(engine, model, mapping=mapping, start=start, end=end,
                                       execution_time=execution if execution is not None else end,
                                       variables=variables, quote=False)
        if test.query is None:
            return True, "", (), ()
        return _compare_frame(engine, frame, test.query, ordered=False, label="query",
                              subject=f"running Python model {model.name}")
    query = render_query(model, start=start, end=end, execution_time=execution, variables=variables,
                         table_mapping=mapping, models=models, runtime_stage="testing")
    if execution is not None:
        query = freeze_time(query, execution)
    checks: list[tuple[str, exp.Query, TestData]] = []
    if test.query is not None:
        checks.append(("query", query, test.query))
    checks += [(f"CTE {name}", _cte_query(query, name, test), data) for name, data in test.ctes]
    outcomes = []
    for label, sql_query, data in checks:
        subject = f"running {label} of model {model.name}"
        frame = engine.dataframe(sql_query.sql(dialect="spark", identify=True), subject=subject)
        outcomes.append(_compare_frame(engine, frame, data, ordered=_is_ordered(sql_query, test), label=label,
                                       subject=subject))
        if not outcomes[-1][0]:
            return outcomes[-1]
    return outcomes[0] if outcomes else (True, "", (), ())


def _is_ordered(query: exp.Query, test: UnitTest) -> bool:
    target = query
    if isinstance(query, exp.Select) and query.args.get("with_") is not None and \
            isinstance(query.args["from_"].this, exp.Table):
        cte = _ctes(query).get(query.args["from_"].this.name.lower())
        target = cte.this if cte is not None else query
    return target.args.get("order") is not None


def _ctes(query: exp.Query) -> dict[str, exp.CTE]:
    with_ = query.args.get("with_")
    return {cte.alias_or_name.lower(): cte for cte in with_.expressions} if with_ is not None else {}


def _cte_query(query: exp.Query, name: str, test: UnitTest) -> exp.Query:
    """WITH <the model's CTEs> SELECT * FROM <name>."""
    if name not in _ctes(query):
        raise ConfigError(f"test `{test.name}`: the query of {test.model} has no CTE `{name}`",
                          path=test.path, line=test.line)
    select = exp.select(exp.Star()).from_(exp.to_table(name))
    select.set("with_", query.args["with_"].copy())
    return select


def _compare_frame(engine: SparkEngine, frame: "DataFrame", data: TestData, *, ordered: bool,
                   label: str, subject: str) -> tuple[bool, str, tuple, tuple]:
    actual = tuple(engine.collect(frame, subject=subject))
    expected, expected_columns = data.rows, data.columns
    if data.query is not None:   # expected rows given as a query
        expected_frame = engine.dataframe(data.query, subject=subject)
        expected = tuple(engine.collect(expected_frame, subject=subject))
        expected_columns = tuple(expected_frame.columns)
    comparison = compare_rows(expected=expected, actual=actual, expected_columns=expected_columns,
                              actual_columns=frame.columns, partial=data.partial, ordered=ordered)
    if comparison.equal:
        return True, "", expected, actual
    columns = expected_columns or tuple(frame.columns)
    text = describe(comparison, expected=expected, actual=actual, columns=columns)
    return False, f"{label}: {text}", expected, actual
