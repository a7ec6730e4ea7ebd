"""The bot's settings (bot.github.settings): cicd_bot and users parsed, errors naming the key, check and
PR environment names."""

from __future__ import annotations

import pytest

from bot.errors import ConfigError
from bot.github.settings import BotSettings, load_settings, pr_environment_name
from bot.project.config import UserConfig


def test_environment_names_are_sanitized_and_capped():
    assert pr_environment_name("Hello-World", 2) == "hello_world_2"
    long = pr_environment_name("a" * 80, 123)
    assert len(long) == 63 and long.endswith("_123")
    assert long != pr_environment_name("a" * 81, 123)
    evil = pr_environment_name("x`; DROP TABLE prod.t; --", 5)
    assert set(evil) <= set("abcdefghijklmnopqrstuvwxyz0123456789_")


def test_settings_from_config_users_and_errors():
    settings = load_settings({"enable_deploy_command": True, "deploy_on": "both", "min_approvals": 2,
                              "required_teams": ["octo-org/data"], "prod_branch_names": ["main"]},
                             [UserConfig("ann", github_username="ann-gh", roles=("required_approver",)),
                              UserConfig("bob", github_username="bob-gh")], gateway="spark")
    assert settings.required_approvers == ("ann-gh",) and settings.min_approvals == 2
    assert settings.check_name("Unit Tests") == "meshbot - Unit Tests (spark)"
    assert settings.deploys_on("tag") and settings.deploys_on("merge")
    assert settings.is_prod_branch("main", "master") and not settings.is_prod_branch("master", "master")
    assert BotSettings().check_name("Unit Tests") == "meshbot - Unit Tests"
    with pytest.raises(ConfigError, match="deploy_on"):
        load_settings({"deploy_on": "sometimes"})
    with pytest.raises(ConfigError, match="unknown cicd_bot setting"):
        load_settings({"enable_deploy_comand": True})


def test_merge_method_setting():
    assert load_settings({}).merge_method is None
    assert load_settings({"merge_method": "Squash"}).merge_method == "squash"
    with pytest.raises(ConfigError, match="merge_method must be one of merge, squash, rebase"):
        load_settings({"merge_method": "fast-forward"})


def test_max_backfill_executor_hours_setting():
    assert load_settings({}).max_backfill_executor_hours is None
    assert load_settings({"max_backfill_executor_hours": 1.5}).max_backfill_executor_hours == 1.5
    assert load_settings({"max_backfill_executor_hours": "20"}).max_backfill_executor_hours == 20.0
    for wrong in ("lots", -1, True, float("nan")):
        with pytest.raises(ConfigError, match="max_backfill_executor_hours must be a number, at least 0"):
            load_settings({"max_backfill_executor_hours": wrong})
