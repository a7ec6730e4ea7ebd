"""Data-diff gates: thresholds on a PR's data diff (duplicated grain, changed rows, null share, row count)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Mapping

from bot.diff.table_diff import ModelDataDiff
from bot.errors import ConfigError


class Level(str, Enum):
    OFF = "off"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Rule:
    """A gate's level and, for the measured ones, the threshold it must exceed to fire."""

    level: Level = Level.OFF
    above: float = 0.0


GATES = ("duplicate_keys", "changed_rows_pct", "null_share_increase", "row_count_change_pct")


@dataclass(frozen=True)
class Gates:
    """`cicd_bot.table_diff_gates`: the PR side duplicating key values fails by default; the others are off
    until configured. `models` overrides rules per model."""

    duplicate_keys: Rule = Rule(Level.FAIL)
    changed_rows_pct: Rule = Rule()        # changed rows, % of the rows matched by key
    null_share_increase: Rule = Rule()     # a column's null share, percentage points up from prod
    row_count_change_pct: Rule = Rule()    # |PR - prod| rows, % of prod's
    models: Mapping[str, "Gates"] = field(default_factory=dict)

    def for_model(self, model: str) -> "Gates":
        return self.models.get(model, self)


@dataclass(frozen=True)
class Finding:
    model: str
    gate: str
    level: Level
    message: str


def parse_gates(raw: Any, *, where: str) -> Gates:
    """Read `table_diff_gates`. A rule is a level (`off`, `warn`, `fail`), a number (fail above it), or
    `{above: N, level: warn}`.

    >>> parse_gates({"changed_rows_pct": 10, "models": {"db.m": {"duplicate_keys": "warn"}}}, where="c.yaml")
    ... # doctest: +NORMALIZE_WHITESPACE
    Gates(duplicate_keys=Rule(level=<Level.FAIL: 'fail'>, above=0.0),
          changed_rows_pct=Rule(level=<Level.FAIL: 'fail'>, above=10.0),
          null_share_increase=Rule(level=<Level.OFF: 'off'>, above=0.0),
          row_count_change_pct=Rule(level=<Level.OFF: 'off'>, above=0.0),
          models={'db.m': Gates(duplicate_keys=Rule(level=<Level.WARN: 'warn'>, above=0.0),
                  changed_rows_pct=Rule(level=<Level.FAIL: 'fail'>, above=10.0),
                  null_share_increase=Rule(level=<Level.OFF: 'off'>, above=0.0),
                  row_count_change_pct=Rule(level=<Level.OFF: 'off'>, above=0.0), models={})})
    """
    if raw is None:
        return Gates()
    if not isinstance(raw, dict):
        raise ConfigError("cicd_bot.table_diff_gates must be a mapping of gate names to rules", path=where)
    models = raw.get("models") or {}
    if not isinstance(models, dict):
        raise ConfigError("cicd_bot.table_diff_gates.models must map model names to gates", path=where)
    base = _rules(Gates(), {k: v for k, v in raw.items() if k != "models"}, "cicd_bot.table_diff_gates", where)
    return replace(base, models={str(name): _rules(base, rules or {}, f"cicd_bot.table_diff_gates.models.{name}",
                                                   where) for name, rules in models.items()})


def _rules(start: Gates, raw: Any, what: str, where: str) -> Gates:
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} must be a mapping of gate names to rules", path=where)
    unknown = sorted(set(raw) - set(GATES))
    if unknown:
        raise ConfigError(f"{what}: unknown gate(s) {', '.join(unknown)}; the gates are {', '.join(GATES)}",
                          path=where)
    return replace(start, **{name: _rule(value, f"{what}.{name}", where) for name, value in raw.items()})


def _rule(value: Any, what: str, where: str) -> Rule:
    if isinstance(value, bool):
        return Rule(Level.FAIL if value else Level.OFF)
    if isinstance(value, (int, float)):
        return Rule(Level.FAIL, float(value))
    if isinstance(value, str) and value.lower() in {level.value for level in Level}:
        return Rule(Level(value.lower()))
    if isinstance(value, dict) and set(value) <= {"above", "level"}:
        level = str(value.get("level", "fail")).lower()
        above = value.get("above", 0)
        if level in {lv.value for lv in Level} and isinstance(above, (int, float)) and not isinstance(above, bool):
            return Rule(Level(level), float(above))
    raise ConfigError(f"{what} must be off, warn, fail, a number (fail above it) or {{above: N, level: warn}} "
                      f"(got `{value}`)", path=where)


def check(diff: ModelDataDiff, gates: Gates) -> tuple[Finding, ...]:
    """What the gates say of one model's diff (prod is the source, the PR the target)."""
    rules, rows, found = gates.for_model(diff.model), diff.rows, []

    def fire(gate: str, rule: Rule, value: float | None, message: str) -> None:
        if rule.level is not Level.OFF and value is not None and value > rule.above:
            found.append(Finding(diff.model, gate, rule.level, message))

    if rows is not None:
        keys = ", ".join(f"`{k}`" for k in diff.keys)
        extra = rows.duplicate_key_target_count - rows.duplicate_key_source_count
        fire("duplicate_keys", rules.duplicate_keys, float(extra) if rows.duplicate_key_target_count else None,
             f"{keys} is not unique in the PR: {rows.target_count} rows hold {rows.distinct_key_target_count} "
             f"distinct values ({rows.duplicate_key_target_count} rows share a value; prod: "
             f"{rows.duplicate_key_source_count})")
        if rows.joined_count:
            pct = 100.0 * rows.partial_match_count / rows.joined_count
            fire("changed_rows_pct", rules.changed_rows_pct, pct,
                 f"{pct:.1f}% of the rows matched by key changed (gate: above {rules.changed_rows_pct.above:g}%)")
        for column, (source, target) in rows.profiles.items():
            if rows.source_count and rows.target_count:
                before = 100.0 * source.nulls / rows.source_count
                after = 100.0 * target.nulls / rows.target_count
                fire("null_share_increase", rules.null_share_increase, after - before,
                     f"`{column}` is NULL in {after:.1f}% of the PR's rows against {before:.1f}% in prod "
                     f"(gate: up more than {rules.null_share_increase.above:g} points)")
    source_count = rows.source_count if rows is not None else diff.source_count
    target_count = rows.target_count if rows is not None else diff.target_count
    if source_count is not None and target_count is not None:
        change = 100.0 * abs(target_count - source_count) / max(source_count, 1)
        fire("row_count_change_pct", rules.row_count_change_pct, change,
             f"{source_count} rows in prod, {target_count} in the PR: {change:.1f}% "
             f"(gate: above {rules.row_count_change_pct.above:g}%)")
    return tuple(found)
