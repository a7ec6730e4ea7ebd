"""The names of meshbot's check runs, in the order the PR comment's status line lists them."""

from __future__ import annotations


class CheckName:
    UNIT_TESTS = "Unit Tests"
    PR_ENVIRONMENT = "PR Environment Synced"
    PROD_PLAN = "Prod Plan Preview"
    APPROVAL = "Required Approval"
    PROD_DEPLOY = "Prod Environment Synced"
    DATA_DIFF = "Data Diff"
    ALL = (UNIT_TESTS, PR_ENVIRONMENT, PROD_PLAN, DATA_DIFF, APPROVAL, PROD_DEPLOY)
