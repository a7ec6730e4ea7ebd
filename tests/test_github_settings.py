"""The bot's settings (bot.github.settings): cicd_bot and users parsed, errors naming the key, check and
PR environment names."""

from __future__ import annotations

import pytest

from bot.errors import ConfigError
import dataclasses

from bot.github.settings import (PARSERS, BotSettings, DeployOn, FullScope, MergeMethod, load_settings,
                                 pr_environment_name)
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


def test_every_setting_has_its_parser_and_choices_arrive_as_enums():
    assert list(PARSERS) == [f.name for f in dataclasses.fields(BotSettings)]
    settings = load_settings({"deploy_on": "TAG", "merge_method": "rebase", "table_diff_full_scope": "Skip"})
    assert (settings.deploy_on, settings.merge_method, settings.table_diff_full_scope) == \
        (DeployOn.TAG, MergeMethod.REBASE, FullScope.SKIP)
    assert settings.deploys_on(DeployOn.TAG) and not settings.deploys_on(DeployOn.MERGE)
    assert (BotSettings().deploy_on, BotSettings().table_diff_full_scope) == (DeployOn.MERGE, FullScope.WHOLE)
    with pytest.raises(TypeError):
        BotSettings(True)          # keyword-only: a positional value would land in whichever field comes first


@pytest.mark.parametrize("key, value, message", [
    ("deploy_on", "Sometimes", "cicd_bot.deploy_on must be one of merge, tag, both (got `sometimes`)"),
    ("table_diff_full_scope", 3, "cicd_bot.table_diff_full_scope must be one of whole, skip (got `3`)"),
    ("min_approvals", 0, "cicd_bot.min_approvals must be at least 1"),
    ("table_diff_window_days", "week", "cicd_bot.table_diff_window_days must be a whole number of days"),
    ("run_on_deploy", None, "cicd_bot.run_on_deploy must be true or false (got `None`)"),
    ("max_backfill_batches", "-2", "cicd_bot.max_backfill_batches must be a whole number (got `-2`)"),
])
def test_a_bad_value_names_the_file_and_the_key(key, value, message):
    with pytest.raises(ConfigError) as error:
        load_settings({key: value}, where="repo/config.yaml")
    assert message in str(error.value) and "repo/config.yaml" in str(error.value)


def test_max_backfill_executor_hours_setting():
    assert load_settings({}).max_backfill_executor_hours is None
    assert load_settings({"max_backfill_executor_hours": 1.5}).max_backfill_executor_hours == 1.5
    assert load_settings({"max_backfill_executor_hours": "20"}).max_backfill_executor_hours == 20.0
    for wrong in ("lots", -1, True, float("nan")):
        with pytest.raises(ConfigError, match="max_backfill_executor_hours must be a number, at least 0"):
            load_settings({"max_backfill_executor_hours": wrong})
