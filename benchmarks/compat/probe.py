"""One side of the comparison, run inside the engine's own interpreter: plan a project over a window, then
print JSON with what each model holds (rows, distinct grain, sums of numeric columns), the unit tests'
and audits' verdicts, and the first error of anything that failed.

    python probe.py sqlmesh|meshbot PROJECT[:PROJECT...] START END EXECUTION_TIME OUT.json

It imports only the engine it probes (SQLMesh in the SQLMesh virtualenv, meshbot in meshbot's)."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

NUMERIC = ("TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "HUGEINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL",
           "NUMERIC", "BYTE", "SHORT", "LONG", "UBIGINT", "UINTEGER", "USMALLINT", "UTINYINT")


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return f"{type(error).__name__}: {text.splitlines()[0][:300]}"


def numeric(type_text: str) -> bool:
    return type_text.upper().split("(")[0].strip() in NUMERIC


def stats(fetch, name: str, columns: list[tuple[str, str]], grain: list[str], quote) -> dict[str, Any]:
    sums = [f"SUM(CAST({quote(c)} AS DOUBLE)) AS {quote('sum_' + c)}" for c, t in columns if numeric(t)]
    row = fetch(f"SELECT COUNT(*) AS n{''.join(', ' + s for s in sums)} FROM {name}")
    out: dict[str, Any] = {"rows": int(row[0]), "sums": {c: row[i + 1] for i, (c, t) in
                                                        enumerate([x for x in columns if numeric(x[1])])}}
    if grain:
        keys = ", ".join(quote(g) for g in grain)
        out["distinct_grain"] = int(fetch(f"SELECT COUNT(*) FROM (SELECT DISTINCT {keys} FROM {name}) AS d")[0])
    return out


def probe_sqlmesh(project: str, start: str, end: str, execution_time: str) -> dict[str, Any]:
    from sqlglot import exp
    from sqlmesh import Context

    report: dict[str, Any] = {"models": {}, "tests": {}, "audits": None, "error": None}
    try:
        context = Context(paths=project.split(os.pathsep))
        models = {m.name: m for m in context.models.values()}
    except Exception as error:  # noqa: BLE001 - the project does not load on SQLMesh: nothing to compare
        report["error"] = first_line(error)
        return report
    failed = sqlmesh_failures(context, {m.fqn: m.name for m in models.values()})
    try:
        # a prod plan takes no start/end: it fills each model from its start to the execution time
        context.plan("prod", execution_time=execution_time, auto_apply=True, no_prompts=True)
    except Exception as error:  # noqa: BLE001 - recorded, the models that ran are still compared
        report["error"] = first_line(error)
    adapter = context.engine_adapter
    for name, model in sorted(models.items()):
        if model.kind.name.value in ("EXTERNAL", "EMBEDDED"):
            continue
        entry: dict[str, Any] = {"kind": model.kind.name.value}
        try:
            view = exp.to_table(name).sql(dialect=adapter.dialect)
            columns = [(c, t.sql(dialect="duckdb")) for c, t in adapter.columns(view).items()]
            # a grain may be written `id AS order_id`; one that is not a column of the view is left out
            names = {c.lower() for c, _ in columns}
            grain = [n for n in (getattr(g, "alias_or_name", None) or str(g) for g in model.grains)
                     if n and n.lower() in names]
            entry.update(stats(lambda q: adapter.fetchone(q), view, columns, grain,
                               lambda c: exp.to_identifier(c, quoted=True).sql(dialect=adapter.dialect)))
        except Exception as error:  # noqa: BLE001
            entry["error"] = first_line(error)
        if name in failed:
            entry["failed"] = failed[name]
        report["models"][name] = entry
    try:
        result = context.test()
        for test in getattr(result, "successes", []):
            report["tests"][str(getattr(test, "test_name", test))] = "pass"
        for test, _ in list(result.failures) + list(result.errors):
            report["tests"][str(getattr(test, "test_name", test))] = "fail"
    except Exception as error:  # noqa: BLE001
        report["tests"] = {"<error>": first_line(error)}
    try:
        report["audits"] = "pass" if context.audit(start=start, end=execution_time) is not False else "fail"
    except Exception as error:  # noqa: BLE001
        report["audits"] = "fail: " + first_line(error)
    return report


def sqlmesh_failures(context, names: dict[str, str]) -> dict[str, str]:
    """Filled while SQLMesh plans: each model it failed (its error's first line) or skipped after a failed
    parent, by model name, as its console is told them (SQLMesh logs a failed model, then raises one
    "Plan application failed" for the whole plan)."""
    failed: dict[str, str] = {}
    console = context.console
    log_failed, log_skipped = console.log_failed_models, console.log_skipped_models

    def name_of(node: Any) -> str:
        fqn = str(getattr(node, "name", None) or getattr(node, "snapshot_name", node))
        return names.get(fqn, fqn.replace('"', ""))

    def failed_models(errors: list) -> None:
        for error in errors:
            failed.setdefault(name_of(error.node), first_line(error.__cause__ or error))
        log_failed(errors)

    def skipped_models(snapshot_names: set) -> None:
        for fqn in snapshot_names:
            failed.setdefault(name_of(fqn), "skipped: a parent failed")
        log_skipped(snapshot_names)

    console.log_failed_models, console.log_skipped_models = failed_models, skipped_models
    return failed


def probe_meshbot(project: str, start: str, end: str, execution_time: str) -> dict[str, Any]:
    from bot.context import Context
    from bot.plan.definition import PlanOptions
    from bot.spark.types import quote_identifier

    report: dict[str, Any] = {"models": {}, "tests": {}, "audits": None, "error": None}
    try:
        context = Context(project.split(os.pathsep))
        models = dict(context.models)
    except Exception as error:  # noqa: BLE001 - the project does not load: nothing else to compare
        report["error"] = first_line(error)
        return report
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time=execution_time)))
    except Exception as error:  # noqa: BLE001
        report["error"] = first_line(error)
    for name, model in sorted(models.items()):
        if model.kind.name.value in ("EXTERNAL", "EMBEDDED"):
            continue
        entry: dict[str, Any] = {"kind": model.kind.name.value}
        try:
            view = ".".join(quote_identifier(p) for p in name.split("."))
            columns = list(context.engine.columns(view))
            names = {c.lower() for c, _ in columns}
            entry.update(stats(lambda q: list(context.engine.fetch(q)[0].values()), view, columns,
                               [g for g in model.grains if g.lower() in names], quote_identifier))
        except Exception as error:  # noqa: BLE001
            entry["error"] = first_line(error)
        report["models"][name] = entry
    try:
        for result in context.test().results:
            report["tests"][result.name] = "pass" if result.passed else "fail"
    except Exception as error:  # noqa: BLE001
        report["tests"] = {"<error>": first_line(error)}
    try:
        report["audits"] = "pass" if not context.audit(start=start, end=execution_time).failures else "fail"
    except Exception as error:  # noqa: BLE001
        report["audits"] = "fail: " + first_line(error)
    context.close()
    return report


def categories_sqlmesh(project: str, execution_time: str) -> dict[str, Any]:
    """The change category of each model a prod plan of the (edited) project would version anew."""
    from sqlmesh import Context

    context = Context(paths=project.split(os.pathsep))
    plan = context.plan_builder("prod", execution_time=execution_time).build()
    return {"categories": {s.name.replace('"', "").split(".", 1)[-1] if s.name.count(".") > 1 else
                           s.name.replace('"', ""): s.change_category.name.lower()
                           for s in plan.new_snapshots if s.change_category is not None}}


def categories_meshbot(project: str, execution_time: str) -> dict[str, Any]:
    from bot.context import Context
    from bot.plan.definition import PlanOptions

    context = Context(project.split(os.pathsep))
    plan = context.plan("prod", options=PlanOptions(execution_time=execution_time))
    context.close()
    return {"categories": {c.name: c.category.value for c in plan.changes if c.category is not None}}


def main() -> None:
    engine, project, start, end, execution_time, out = sys.argv[1:7]
    if len(sys.argv) > 7 and sys.argv[7] == "categories":   # after the harness's edit of one model
        categorize = categories_sqlmesh if engine == "sqlmesh" else categories_meshbot
        try:
            report = categorize(project, execution_time)
        except Exception as error:  # noqa: BLE001 - the harness prints it
            report = {"categories": {}, "error": first_line(error)}
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1, default=str)
        return
    probe = probe_sqlmesh if engine == "sqlmesh" else probe_meshbot
    try:
        report = probe(project, start, end, execution_time)
    except Exception:  # noqa: BLE001 - the harness prints it
        report = {"models": {}, "tests": {}, "audits": None, "error": traceback.format_exc().strip().splitlines()[-1]}
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=1, default=str)


if __name__ == "__main__":
    main()
