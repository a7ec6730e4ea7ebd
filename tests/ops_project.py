"""A tiny project for the operations tests: an hourly incremental model and a daily FULL model reading it."""

from __future__ import annotations

from pathlib import Path

CONFIG = """
gateways:
  local:
    connection:
      type: spark
      master: local[2]
    state_connection:
      type: sqlite
      database: .meshbot/state.db
default_gateway: local
model_defaults:
  dialect: spark
  start: '2024-01-01'
"""

HOURLY = """
MODEL (
  name ops.hourly,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ts),
  cron '@hourly',
  start '2024-01-01',
  grain ts,
  description 'one row per hour'
);

SELECT ts, HOUR(ts) AS h
FROM (SELECT EXPLODE(SEQUENCE(CAST(@start_ts AS TIMESTAMP), CAST(@end_ts AS TIMESTAMP),
                              INTERVAL 1 HOUR)) AS ts)
"""

DAILY = """
MODEL (
  name ops.daily,
  kind FULL,
  cron '@daily',
  start '2024-01-01'
);

SELECT COUNT(*) AS hours, MAX(ts) AS last_ts
FROM ops.hourly
"""


def write_ops_project(root: Path) -> Path:
    """Write the project into `root` and return it."""
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG)
    (root / "models" / "hourly.sql").write_text(HOURLY)
    (root / "models" / "daily.sql").write_text(DAILY)
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))
