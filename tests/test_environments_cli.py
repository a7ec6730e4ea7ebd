"""`meshbot environments` reads as people talk (expires in 6 days, never; no raw column names, no NULL), and
`--history` says per plan which models it changed, added or removed and who or what applied it; on real SQLite
state, no Spark (the command never starts it)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.context import Context
from bot.plan.drift import deploy_source, local_source
from bot.state.protocol import Environment, EnvironmentSnapshot

DAY = 86_400_000


def _snaps(**identifiers: str) -> tuple[EnvironmentSnapshot, ...]:
    return tuple(EnvironmentSnapshot(name.replace("_", "."), ident, ident, "FULL", f"t_{ident}")
                 for name, ident in identifiers.items())


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """prod served by four plans (a CLI plan, a release deploy, a PR's /deploy, a rollback) and two PR
    environments, one expiring, one expired."""
    root = tmp_path_factory.mktemp("envs")
    (root / "models").mkdir()
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    state = Context(root).state
    now = int(time.time() * 1000)
    plans = [("p1" * 8, local_source(), _snaps(shop_orders="1", shop_items="1")),
             ("p2" * 8, deploy_source("main", "a" * 40, "https://github.com/o/r/actions/runs/1", tag="v1.2"),
              _snaps(shop_orders="2", shop_items="1", shop_revenue="1")),
             ("p3" * 8, "/deploy of #7 at bbbbbbbbbbbb by ann https://github.com/o/r/actions/runs/2",
              _snaps(shop_orders="3", shop_revenue="1")),
             ("p4" * 8, local_source("rollback to p2p2p2p2p2p2"), _snaps(shop_orders="2", shop_items="1",
                                                                        shop_revenue="1"))]
    expected = None
    for plan_id, source, snapshots in plans:
        state.promote(Environment("prod", snapshots, plan_id), expected_plan_id=expected, source=source)
        state.finalize("prod", plan_id)
        expected = plan_id
    state.promote(Environment("shop_7", _snaps(shop_orders="3"), "d1" * 8, expiration_ts=now + 6 * DAY + DAY // 2),
                  expected_plan_id=None, source="sync of #7 at bbbbbbbbbbbb")
    state.promote(Environment("shop_3", _snaps(shop_orders="1"), "d2" * 8, expiration_ts=now - 2 * DAY - 60_000),
                  expected_plan_id=None, source="sync of #3 at cccccccccccc")
    state.finalize("shop_3", "d2" * 8)
    return root


def _invoke(root: Path, *args: str):
    result = CliRunner().invoke(cli, ["-p", str(root), "environments", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_list_says_when_each_environment_expires_in_words(project):
    text = _invoke(project)
    lines = {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0] in
             ("prod", "shop_7", "shop_3")}
    assert "never" in lines["prod"] and "in 6 days" in lines["shop_7"] and "expired 2 days ago" in lines["shop_3"]
    assert "not yet" in lines["shop_7"] and "just now" in lines["prod"]
    assert "NULL" not in text and "None" not in text
    assert not any(raw in text for raw in ("snapshot_count", "expires_at", "finalized_at"))
    assert "Environment" in text and "Expires" in text
    listed = json.loads(_invoke(project, "--json"))           # the JSON keeps its keys for scripts
    assert {e["name"]: e["expires_at"] for e in listed}["prod"] is None


def test_history_names_what_each_plan_changed_and_who_applied_it(project):
    text = _invoke(project, "prod", "--history")
    rows = [line for line in text.splitlines() if line.lstrip().startswith("p")]
    assert [row.split()[0] for row in rows] == ["p4p4p4p4p4p4", "p3p3p3p3p3p3", "p2p2p2p2p2p2", "p1p1p1p1p1p1"]
    assert "(current)" in rows[0]
    assert "changed shop.orders; added shop.items" in rows[0] and "rollback to p2p2p2p2p2p2 by " in rows[0]
    assert "changed shop.orders; removed shop.items" in rows[1] and "/deploy of PR #7 at bbbbbbbbbbbb by ann" in rows[1]
    assert "changed shop.orders; added shop.revenue" in rows[2] and "deploy of main@aaaaaaaaaaaa (release v1.2)" in rows[2]
    assert "added shop.items, shop.orders" in rows[3] and "CLI plan by " in rows[3]
    assert "https://" not in text and "NULL" not in text

    history = json.loads(_invoke(project, "prod", "--history", "--json"))
    assert [h["current"] for h in history] == [True, False, False, False]
    assert history[1]["changed"] == ["shop.orders"] and history[1]["removed"] == ["shop.items"]
    assert history[1]["source"].endswith("actions/runs/2") and history[1]["applied_by"].startswith("/deploy of PR #7")
    pr = _invoke(project, "shop_7", "--history")
    assert "PR #7 synced at bbbbbbbbbbbb" in pr and "added shop.orders" in pr
