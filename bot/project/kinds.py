"""Read a MODEL header's `kind NAME (prop value, ...)` into a Kind, validating required properties."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import UNESCAPED_SEQUENCES

from bot.errors import ConfigError
from bot.project.header import (Prop, parse_props, parse_value, value_bool, value_int, value_items,
                                value_names, value_text)
from bot.project.model import KIND_ALIASES, Kind, KindName, OnDestructiveChange

_KIND = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\((.*)\))?\s*$", re.S)
# Header keys accepted at the model level that are kind properties (SQLMesh accepts both places).
KIND_LEVEL_KEYS = ("batch_size", "lookback", "forward_only", "on_destructive_change", "disable_restatement")
# The kinds with a `lookback` in SQLMesh 0.236.4 (another kind's is an invalid field there)
_LOOKBACK_KINDS = (KindName.INCREMENTAL_BY_TIME_RANGE, KindName.INCREMENTAL_BY_UNIQUE_KEY, KindName.CUSTOM)
# SQLMesh kind properties meshbot reads but does not use.
_IGNORED = frozenset({"batch_concurrency", "on_additive_change", "auto_restatement_cron",
                      "auto_restatement_intervals", "when_matched", "merge_filter",
                      "partition_by_time_column", "updated_at_as_valid_from",
                      "execution_time_as_valid_from", "time_data_type", "min_interval_unit"})


def parse_kind(prop: Prop | None, *, default: str | None, dialect: str, path: Path,
               extra: dict[str, Prop], on_destructive_change: str = "error", model_name: str = "") -> Kind:
    """The model's Kind; `extra` holds kind-level keys written at the model level (batch_size...)."""
    if prop is None:
        name_text, props = (default or "VIEW"), ()
        line = None
    else:
        match = _KIND.match(prop.text)
        if not match:
            raise ConfigError(f"invalid kind `{prop.text[:60]}`", path=path, line=prop.line)
        name_text, inner, line = match.group(1), match.group(2), prop.line
        props = _inner_props(inner, prop.line, path) if inner is not None else ()
    name = _kind_name(name_text, path=path, line=line)
    fields: dict[str, Any] = {"name": name,
                              "on_destructive_change": OnDestructiveChange(on_destructive_change)}
    for item in (*extra.values(), *props):
        _apply_property(fields, item, dialect=dialect, path=path)
        if item.key == "lookback" and name not in _LOOKBACK_KINDS:   # an appending kind would add rows twice
            raise ConfigError(f"`lookback` is not a property of kind {name.value} (as in SQLMesh); it applies to "
                              f"{', '.join(kind.value for kind in _LOOKBACK_KINDS)}", path=path, line=item.line)
    _check_required(fields, path=path, line=line)
    if name is KindName.CUSTOM:   # materializations/*.py load with the project's other Python, as in SQLMesh
        from bot.project.materializations import find_materialization
        find_materialization(fields["materialization"], model=model_name, path=path, line=line)
    return Kind(**fields)


def ignored_kind_properties(prop: Prop | None, path: Path) -> list[tuple[str, int]]:
    """(key, line) of the kind's properties meshbot reads but does not use (warned about by the loader)."""
    if prop is None:
        return []
    match = _KIND.match(prop.text)
    if not match or match.group(2) is None:
        return []
    return [(p.key, p.line) for p in _inner_props(match.group(2), prop.line, path) if p.key in _IGNORED]


def _materialization_properties(prop: Prop, value: exp.Expression, dialect: str, path: Path) -> str:
    """`(key = value, ...)` as SQL text in the model's dialect; each item must be `key = value`."""
    items = value_items(value)
    if not all(isinstance(item, (exp.EQ, exp.PropertyEQ)) and isinstance(item.this, (exp.Column, exp.Identifier))
               for item in items):
        raise ConfigError("`materialization_properties` expects `(name = value, ...)`", path=path, line=prop.line)
    return exp.Tuple(expressions=[item.copy() for item in items]).sql(dialect=dialect)


def _kind_name(text: str, *, path: Path, line: int | None) -> KindName:
    try:
        return KindName(KIND_ALIASES.get(text.upper(), text.upper()))
    except ValueError:
        known = ", ".join(k.value for k in KindName)
        raise ConfigError(f"unknown model kind `{text}`; known kinds: {known}", path=path,
                          line=line) from None


def _inner_props(inner: str, line: int, path: Path) -> tuple[Prop, ...]:
    props = parse_props(inner, base=0, text=inner, path=path)
    return tuple(Prop(p.key, p.text, line + p.line - 1) for p in props)


def _apply_property(fields: dict[str, Any], prop: Prop, *, dialect: str, path: Path) -> None:
    key = prop.key
    if key in _IGNORED:
        return
    value = parse_value(prop, dialect=dialect, path=path)
    if key == "time_column":
        items = value_items(value)
        fields["time_column"] = value_text(items[0], dialect).lower()
        if len(items) > 1:
            fields["time_column_format"] = value_text(items[1], dialect)
    elif key in ("batch_size", "lookback"):
        fields[key] = value_int(prop, value, dialect, path)
    elif key in ("forward_only", "disable_restatement", "invalidate_hard_deletes", "materialized",
                 "insert_overwrite"):
        fields[key] = value_bool(prop, value, dialect, path)
    elif key == "on_destructive_change":
        fields[key] = _on_destructive_change(prop, value_text(value, dialect), path)
    elif key == "unique_key":
        fields["unique_key"] = tuple(n.lower() for n in value_names(value, dialect))
    elif key in ("valid_from_name", "valid_to_name", "updated_at_name"):
        fields[key] = value_text(value, dialect).lower()
    elif key == "columns":
        fields["scd_columns"] = ("*",) if isinstance(value, exp.Star) else tuple(
            n.lower() for n in value_names(value, dialect))
    elif key == "path":
        fields["seed_path"] = value_text(value, dialect)
    elif key == "csv_settings":
        fields["csv_settings"] = _csv_settings(prop, value, dialect, path)
    elif key == "materialization" and fields["name"] is KindName.CUSTOM:
        fields["materialization"] = value_text(value, dialect)
    elif key == "materialization_properties" and fields["name"] is KindName.CUSTOM:
        fields["materialization_properties"] = _materialization_properties(prop, value, dialect, path)
    else:
        raise ConfigError(f"unknown property `{key}` for kind {fields['name'].value}", path=path,
                          line=prop.line)


def _on_destructive_change(prop: Prop, text: str, path: Path) -> OnDestructiveChange:
    try:
        return OnDestructiveChange(text.lower())
    except ValueError:
        raise ConfigError(f"`{prop.key}` must be error, warn or allow, got `{text}`", path=path,
                          line=prop.line) from None


def _csv_settings(prop: Prop, value: exp.Expression, dialect: str, path: Path) -> tuple:
    settings = []
    for item in value_items(value):
        if isinstance(item, (exp.EQ, exp.PropertyEQ)):
            key, raw = value_text(item.this, dialect), item.expression
        elif isinstance(item, exp.Alias):
            key, raw = item.alias, item.this
        else:
            raise ConfigError("`csv_settings` expects `(name = value, ...)`", path=path, line=prop.line)
        if key.lower() == "na_values":
            settings.append(("na_values", na_values_setting(_na_values(raw, dialect, path, prop.line))))
        elif isinstance(raw, exp.Boolean):
            settings.append((key.lower(), bool(raw.this)))
        elif isinstance(raw, exp.Literal) and not raw.is_string:
            settings.append((key.lower(), int(raw.this) if raw.is_int else float(raw.this)))
        else:
            text = value_text(raw, dialect)
            # a dialect that reads no backslash escapes keeps '\t' as two characters; SQLMesh maps them back
            settings.append((key.lower(), UNESCAPED_SEQUENCES.get(text, text)))
    return tuple(settings)


def _na_values(raw: exp.Expression, dialect: str, path: Path, line: int | None) -> list[Any] | dict[str, list[Any]]:
    """`na_values = 'x'`, `('x', 'y')` or, per column, `(col = ('x'), other = ('y', 'z'))`, as SQLMesh reads them."""
    def values(node: exp.Expression) -> list[Any]:
        items = [node.unnest()] if isinstance(node, exp.Paren) or not isinstance(node, (exp.Tuple, exp.Array)) \
            else node.expressions
        try:
            return [item.to_py() for item in items]
        except ValueError:
            raise ConfigError(f"`csv_settings` na_values must be literals, not `{node.sql(dialect)}`",
                              path=path, line=line) from None

    items = raw.expressions if isinstance(raw, (exp.Tuple, exp.Array)) else [raw.unnest()]
    if items and isinstance(items[0], (exp.EQ, exp.PropertyEQ)):
        return {value_text(item.left, dialect): values(item.right) for item in items}
    return values(raw)


def na_values_setting(value: Any) -> str:
    """na_values as kept in a model (JSON text, so a definition stays plain data): a list, or a column's list
    per column name."""
    if isinstance(value, dict):
        return json.dumps({str(k): list(v) if isinstance(v, (list, tuple)) else [v] for k, v in value.items()})
    return json.dumps(list(value) if isinstance(value, (list, tuple)) else [value])


def _check_required(fields: dict[str, Any], *, path: Path, line: int | None) -> None:
    name: KindName = fields["name"]
    if name is KindName.INCREMENTAL_BY_TIME_RANGE and not fields.get("time_column"):
        raise ConfigError("kind INCREMENTAL_BY_TIME_RANGE requires `time_column`", path=path, line=line)
    if name in (KindName.INCREMENTAL_BY_UNIQUE_KEY, KindName.SCD_TYPE_2_BY_TIME,
                KindName.SCD_TYPE_2_BY_COLUMN) and not fields.get("unique_key"):
        raise ConfigError(f"kind {name.value} requires `unique_key`", path=path, line=line)
    if name is KindName.SCD_TYPE_2_BY_COLUMN and not fields.get("scd_columns"):
        raise ConfigError("kind SCD_TYPE_2_BY_COLUMN requires `columns`", path=path, line=line)
    if name is KindName.CUSTOM and not fields.get("materialization"):
        raise ConfigError("kind CUSTOM requires `materialization`", path=path, line=line)
    if name is KindName.SEED and not fields.get("seed_path"):
        raise ConfigError("kind SEED requires `path`", path=path, line=line)
