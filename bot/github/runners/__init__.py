"""One runner per bot command, looked up by name; each takes a BotRun and returns an exit code."""

from __future__ import annotations

from typing import Callable

from bot.github.runners.base import BotRun
from bot.github.runners.cleanup import cleanup_pr_environment
from bot.github.runners.deploy import deploy_production
from bot.github.runners.dispatch import run_all
from bot.github.runners.pr import (check_required_approvers, gen_prod_plan, run_tests,
                                   update_pr_environment)

Runner = Callable[[BotRun], int]

RUNNERS: dict[str, Runner] = {
    "run-all": run_all,
    "run-tests": run_tests,
    "update-pr-environment": update_pr_environment,
    "gen-prod-plan": gen_prod_plan,
    "check-required-approvers": check_required_approvers,
    "deploy-production": deploy_production,
    "cleanup-pr-environment": cleanup_pr_environment,
}

__all__ = ["BotRun", "RUNNERS", "Runner"]
