"""Model ⇄ JSON-safe dict, used to store snapshot definitions in state; SQL kept in the model's dialect."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from bot.project.model import AuditRef, Kind, KindName, Model, OnDestructiveChange
from bot.project.printed_sql import cached_sql, remember_sql   # a model from the parse cache carries its SQL
from bot.project.sqltext import parse_sql, to_sql

FORMAT_VERSION = 1


def model_to_dict(model: Model) -> dict[str, Any]:
    """Every field of `model` as JSON-safe values; expressions as SQL text (`@var` kept as written)."""
    sql = cached_sql(model)
    if sql is None:
        sql = (to_sql(model.query, model.dialect) if model.query is not None else None,
               [to_sql(s, model.dialect) for s in model.pre_statements],
               [to_sql(s, model.dialect) for s in model.post_statements])
        remember_sql(model, sql)
    query, pre, post = sql
    return {
        "format": FORMAT_VERSION,
        "name": model.name,
        "kind": _kind_to_dict(model.kind),
        "dialect": model.dialect,
        "path": str(model.path),
        "query": query,
        "query_text": model.query_text,
        "pre_statements": list(pre),
        "post_statements": list(post),
        "cron": model.cron,
        "start": model.start,
        "end": model.end,
        "grains": list(model.grains),
        "audits": [{"name": a.name, "args": [list(p) for p in a.args], "blocking": a.blocking}
                   for a in model.audits],
        "owner": model.owner,
        "tags": list(model.tags),
        "description": model.description,
        "column_descriptions": [list(p) for p in model.column_descriptions],
        "columns": [list(p) for p in model.columns],
        "partitioned_by": list(model.partitioned_by),
        "physical_properties": [list(p) for p in model.physical_properties],
        **({"session_properties": [list(p) for p in model.session_properties]} if model.session_properties else {}),
        "depends_on_explicit": list(model.depends_on_explicit),
        "depends_on": sorted(model.depends_on),
        "enabled": model.enabled,
        "python_source": model.python_source,
        "python_entrypoint": model.python_entrypoint,
        "seed_content_hash": model.seed_content_hash,
        "seed_abs_path": str(model.seed_abs_path) if model.seed_abs_path else None,
        "line": model.line,
        **({"jinja_query": model.jinja_query, "jinja_line": model.jinja_line}
           if model.jinja_query is not None else {}),
        **({"jinja_macros": [list(m) for m in model.jinja_macros]} if model.jinja_macros else {}),
        **({"blueprint_variables": [list(p) for p in model.blueprint_variables]} if model.blueprint_variables else {}),
        **({"project": model.project} if model.project else {}),
        **({"sql_function": model.sql_function, "sql_function_source": model.sql_function_source}
           if model.sql_function else {}),
        **({"variables": dict(model.variables)} if model.variables is not None else {}),
    }


def model_from_dict(data: dict[str, Any]) -> Model:
    """Inverse of model_to_dict; the query and statements are parsed again."""
    dialect = data["dialect"]
    return Model(
        **model_fields(data),
        query=_parse_one(data["query"], dialect) if data.get("query") else None,
        pre_statements=tuple(_parse_one(s, dialect) for s in data.get("pre_statements", ())),
        post_statements=tuple(_parse_one(s, dialect) for s in data.get("post_statements", ())),
    )


def model_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The fields of model_from_dict(data) but its query and statements (the parse cache builds those lazily)."""
    return dict(
        name=data["name"],
        kind=_kind_from_dict(data["kind"]),
        dialect=data["dialect"],
        path=Path(data["path"]),
        query_text=data.get("query_text", ""),
        cron=data.get("cron", "@daily"),
        start=data.get("start"),
        end=data.get("end"),
        grains=tuple(data.get("grains", ())),
        audits=tuple(AuditRef(name=a["name"], args=tuple(tuple(p) for p in a.get("args", ())),
                              blocking=a.get("blocking", True)) for a in data.get("audits", ())),
        owner=data.get("owner"),
        tags=tuple(data.get("tags", ())),
        description=data.get("description"),
        column_descriptions=_pairs(data.get("column_descriptions")),
        columns=_pairs(data.get("columns")),
        partitioned_by=tuple(data.get("partitioned_by", ())),
        physical_properties=_pairs(data.get("physical_properties")),
        session_properties=_pairs(data.get("session_properties")),
        depends_on_explicit=tuple(data.get("depends_on_explicit", ())),
        depends_on=frozenset(data.get("depends_on", ())),
        enabled=data.get("enabled", True),
        python_source=data.get("python_source"),
        python_entrypoint=data.get("python_entrypoint"),
        seed_content_hash=data.get("seed_content_hash"),
        seed_abs_path=Path(data["seed_abs_path"]) if data.get("seed_abs_path") else None,
        line=data.get("line", 1),
        jinja_query=data.get("jinja_query"),
        jinja_line=data.get("jinja_line", 1),
        jinja_macros=_pairs(data.get("jinja_macros")),
        blueprint_variables=_pairs(data.get("blueprint_variables")),
        project=data.get("project", ""),
        sql_function=data.get("sql_function"),
        sql_function_source=data.get("sql_function_source"),
        variables=data.get("variables"),
    )


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    if not items:   # most models' lists are empty: no generator (10,000 cached models x 5 lists)
        return ()
    return tuple((str(k), str(v)) for k, v in items)


def _parse_one(sql: str, dialect: str):
    parsed = parse_sql(sql, dialect)
    assert len(parsed) == 1, f"expected one statement in stored SQL: {sql[:80]}"
    return parsed[0]


def _kind_to_dict(kind: Kind) -> dict[str, Any]:
    data = {name: getattr(kind, name) for name in _KIND_FIELD_NAMES}   # flat values: asdict's deep copy costs ~1 ms
    data["name"] = kind.name.value
    data["on_destructive_change"] = kind.on_destructive_change.value
    data["unique_key"] = list(kind.unique_key)
    data["scd_columns"] = list(kind.scd_columns)
    data["csv_settings"] = [list(item) for item in kind.csv_settings]
    if not kind.insert_overwrite:   # only INCREMENTAL_UNMANAGED sets it; older definitions lack it
        data.pop("insert_overwrite")
    if kind.materialization is None:   # only CUSTOM sets them; other kinds' definitions stay as they were
        data.pop("materialization")
        data.pop("materialization_properties")
    return data


_KIND_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Kind))
_KIND_FIELDS = frozenset(_KIND_FIELD_NAMES)


_KINDS: dict[tuple[Any, ...], Kind] = {}   # flat kind dicts read before -> their Kind (frozen, shared)


def _kind_from_dict(data: dict[str, Any]) -> Kind:
    """The Kind of a stored kind dict. Equal dicts (same keys in order, values of the same exact types,
    every list empty) share one Kind: 10,000 models read from the parse cache have a few kinds."""
    values = tuple(data.values())
    if any(type(value) is list and value for value in values):   # unique keys, SCD columns, CSV settings
        return _new_kind(data)
    key = (tuple(data), tuple(map(type, values)), tuple(() if type(value) is list else value for value in values))
    try:
        kind = _KINDS.get(key)
    except TypeError:   # an unhashable value: not what model_to_dict writes, built (and refused) as it is
        return _new_kind(data)
    if kind is None:
        kind = _new_kind(data)
        if len(_KINDS) < 256:   # bounded: crafted data cannot grow it without end
            _KINDS[key] = kind
    return kind


def _new_kind(data: dict[str, Any]) -> Kind:
    values = {k: v for k, v in data.items() if k in _KIND_FIELDS}
    values["name"] = KindName(values["name"])
    values["on_destructive_change"] = OnDestructiveChange(values.get("on_destructive_change", "error"))
    values["unique_key"] = tuple(values.get("unique_key", ()))
    values["scd_columns"] = tuple(values.get("scd_columns", ()))
    values["csv_settings"] = tuple(tuple(item) for item in values.get("csv_settings", ()))
    return Kind(**values)
