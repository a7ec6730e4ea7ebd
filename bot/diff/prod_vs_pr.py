"""Compare each changed model's prod rows with the PR's: by key when it has one, else counts and schema."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.diff.table_diff import DiffSide, ModelDataDiff, count_rows, table_diff
from bot.errors import PlanError
from bot.timeline.times import MS_PER_DAY, to_datetime

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine

NO_KEY_NOTE = ("rows not compared one by one: the model has neither a grain nor a unique_key to match "
               "them on; only counts and schema")


class ComparedModel(Protocol):
    """Where one changed model's prod rows (base) and PR rows (change) are (bot.plan.preview_queries.PreviewTarget)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def key_source(self) -> str: ...
    @property
    def window(self) -> tuple[int, int] | None: ...
    @property
    def base(self) -> DiffSide | None: ...
    @property
    def change(self) -> DiffSide | None: ...
    @property
    def previewed(self) -> bool: ...
    @property
    def note(self) -> str: ...


def compare_models(engine: "SparkEngine", targets: Iterable[ComparedModel], *, decimals: int = 3,
                   show_sample: bool = False, limit: int = 20) -> tuple[ModelDataDiff, ...]:
    """One ModelDataDiff per target, prod as the source and the PR as the target; a target without
    sides keeps its note, and one whose key is missing on a side says so instead of failing the rest."""
    return tuple(_compare(engine, target, decimals=decimals, show_sample=show_sample, limit=limit)
                 for target in targets)


def _compare(engine: "SparkEngine", target: ComparedModel, *, decimals: int, show_sample: bool,
             limit: int) -> ModelDataDiff:
    base = ModelDataDiff(model=target.name, kind=target.kind, reason=target.reason,
                         window=window_text(target.window) if target.base else "",
                         previewed=target.previewed, keys=target.keys, key_source=target.key_source,
                         note=target.note)
    if target.base is None or target.change is None:
        return base
    if not target.keys:
        schema, source_count, target_count = count_rows(engine, source_table=target.base,
                                                        target_table=target.change)
        return replace(base, schema=schema, source_count=source_count, target_count=target_count,
                       note=NO_KEY_NOTE)
    try:
        result = table_diff(engine=engine, source_table=target.base, target_table=target.change,
                            keys=target.keys, decimals=decimals, show_sample=show_sample, limit=limit,
                            source_label="prod", target_label="PR", model=target.name)
    except PlanError as error:   # e.g. the key column is not on both sides
        return replace(base, note=f"not compared: {error}")
    return replace(base, schema=result.schema, rows=result.rows, source_count=result.rows.source_count,
                   target_count=result.rows.target_count)


def window_text(window: tuple[int, int] | None) -> str:
    """`2024-01-01 – 2024-01-07 (7 days)` for a window of whole days, else with times; None: whole query.

    >>> window_text((1704067200000, 1704672000000))
    '2024-01-01 – 2024-01-07 (7 days)'
    >>> window_text((1704067200000, 1704070800000))
    '2024-01-01 00:00 – 2024-01-01 01:00 (0.0416667 days)'
    >>> window_text(None)
    'whole query'
    """
    if window is None:
        return "whole query"
    start, end = (to_datetime(ms) for ms in window)
    days = (window[1] - window[0]) / MS_PER_DAY
    if window[0] % MS_PER_DAY == 0 and window[1] % MS_PER_DAY == 0:
        last = to_datetime(window[1] - 1)
        text = f"{start:%Y-%m-%d} – {last:%Y-%m-%d}"
    else:
        text = f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M}"
    return f"{text} ({days:g} day{'s' if days != 1 else ''})"
