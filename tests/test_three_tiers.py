"""Three tiers as shipped: merge → staging (backfilled there), release → prod, a virtual promotion."""

from __future__ import annotations

from bot.context import Context
from bot.plan.definition import PlanOptions

from test_faults import write_project

SCHEMA = "tiers"
WHEN = PlanOptions(execution_time="2024-01-04")


def test_a_release_promotes_what_staging_computed_without_computing_it_again(tmp_path, clean_catalog):
    """Three tiers: a merge deploys staging (backfilled there), the release of the same commit makes prod
    serve the same tables: a virtual promotion, 0 batches computed."""
    root = write_project(tmp_path / "proj", SCHEMA)
    staging = Context(root)
    computed = staging.apply(staging.plan("staging", options=WHEN))
    assert computed.evaluated
    prod = Context(root)
    plan = prod.plan("prod", options=WHEN)
    assert plan.backfills == ()
    assert prod.apply(plan).evaluated == ()
    assert prod.fetchdf(f"SELECT ds, total FROM {SCHEMA}.daily ORDER BY ds") == \
        prod.fetchdf(f"SELECT ds, total FROM {SCHEMA}__staging.daily ORDER BY ds")
