"""A whole PR lifecycle on local Spark with the real Context and real webhook payloads, GitHub mocked with
`responses` through the real GithubClient (PyGithub); every request and mocked response is validated
against the OpenAPI description in tests/fixtures/github.

open → comment created; push → the same comment edited; review by a required approver → approval passes;
stale after a push; `/deploy` ignored from a reader, acknowledged (and still gated) for a writer;
merge (push to the prod branch) → deploy to prod; close → environment gone. Rate limits and 5xx on the way
are retried. One prod apply per module; PR environments skip backfill.

End to end: event → action.main → gate → runners → GithubClient → comment and check runs, on Spark.
"""

from __future__ import annotations

import copy
import csv
import re
from dataclasses import replace
from pathlib import Path

import pytest
from rendered import shown
import responses

from bot.context import Context
from bot.github.client import GithubClient, RetryPolicy
from bot.github.event import parse_event
from bot.github.local import StepOutputs
from bot.github.runners import BotRun, dispatch
from bot.github.settings import load_settings
from bot.github.trusted import TrustedConfig
from bot.plan.definition import PlanOptions
from bot.project.config import UserConfig
from bot.project.example import write_example
from github_support import FakeRepository, install, payload, pr_comment_event

# The bot's gate settings come from a trusted source (the action's input or the default branch), never
# from the project the PR checks out.
TRUSTED = TrustedConfig(cicd_bot={"deploy_on": "merge", "enable_deploy_command": True},
                        users=(UserConfig("ann", "ann-gh", ("required_approver",)),),
                        sources=("the action's `config` input",))
ENV = "hello_world_2"          # repository Hello-World, PR #2
HEAD_A = payload("pull_request/opened.payload.json")["pull_request"]["head"]["sha"]
HEAD_B = "b" * 40
MERGE_SHA = payload("push/with-new-branch.payload.json")["after"]
RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/42"
UNIT, PR_ENV, PROD_PLAN, APPROVAL, DEPLOY = (f"meshbot - {n}" for n in (
    "Unit Tests", "PR Environment Synced", "Prod Plan Preview", "Required Approval", "Prod Environment Synced"))

NO_WAIT = RetryPolicy(backoff=0, secondary_rate_wait=0, max_wait=0)


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    """The example project applied to prod once, then changed the way a PR would change it."""
    before = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    root = tmp_path_factory.mktemp("lifecycle") / "shop"
    write_example(root)
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
    model = root / "models" / "customer_revenue.sql"
    model.write_text(model.read_text().replace("SUM(o.amount) AS revenue", "SUM(o.amount) * 2 AS revenue"))
    test = root / "tests" / "test_customer_revenue.yaml"
    test.write_text(test.read_text().replace("revenue: 15.5", "revenue: 31.0").replace("revenue: 20.0", "revenue: 40.0"))
    yield root
    for name in sorted({row[0] for row in spark.sql("SHOW DATABASES").collect()} - before):
        spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


@pytest.fixture
def github():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        mock = install(rsps)
        yield mock
        assert not mock.errors, mock.errors


class Bot:
    """Runs `run-all` the way the action does, with the real client against the mocked API."""

    def __init__(self, root: Path, repo: FakeRepository, out: Path) -> None:
        self.context = Context(root)
        self.repo, self.out = repo, out

    def __call__(self, name: str, raw: dict, *, head: str | None = None, **cicd_bot: object) -> int:
        """`head`: the commit the job checked out (a `/deploy` job must have the PR's head)."""
        event = parse_event(name, raw)
        trusted = replace(TRUSTED, cicd_bot={**TRUSTED.cicd_bot, **cicd_bot})
        settings = load_settings(trusted.cicd_bot, trusted.users)
        client = GithubClient(token="ghs_lifecycle_token", repo=event.repo, bot_login=settings.bot_login,
                              seconds_between_writes=0, retry=NO_WAIT)
        self.outputs = StepOutputs.in_folder(self.out)
        run = BotRun(event=event, settings=settings, github=client, context=self.context, outputs=self.outputs,
                     run_url=RUN_URL, trusted=trusted, checkout_head=head, commits_behind=client.commits_behind)
        return dispatch(run, "run-all")

    @property
    def comment(self) -> str:
        marked = [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" in c["body"]]
        assert len(marked) == 1, "the bot must keep exactly one PR comment"
        return marked[0]

    @property
    def replies(self) -> list[str]:
        return [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" not in c["body"]]

    def conclusion(self, name: str) -> str:
        return self.repo.check(name)["conclusion"]


def _revenue(root: Path) -> dict[int, float]:
    """Prod's revenue per customer, from the seed CSVs (customers joined with their orders)."""
    with (root / "seeds" / "raw_customers.csv").open() as handle:
        customers = {int(row["customer_id"]) for row in csv.DictReader(handle)}
    revenue: dict[int, float] = {}
    with (root / "seeds" / "raw_orders.csv").open() as handle:
        for row in csv.DictReader(handle):
            if int(row["customer_id"]) in customers:
                revenue[int(row["customer_id"])] = revenue.get(int(row["customer_id"]), 0.0) + float(row["amount"])
    return revenue


def _pr_event(action_file: str, head: str) -> dict:
    raw = copy.deepcopy(payload(action_file))
    raw["pull_request"]["head"]["sha"] = head
    return raw


def _comment_event(login: str, body: str) -> dict:
    return pr_comment_event(body, login)


def test_pull_request_lifecycle_through_the_github_api(shop, github, tmp_path):
    repo = FakeRepository(github)
    bot = Bot(shop, repo, tmp_path / "out")
    opened = _pr_event("pull_request/opened.payload.json", HEAD_A)
    repo.set_pull(opened["pull_request"])

    # open, with a bounded PR backfill so the changed model's data is compared with prod; a 5xx on
    # listing comments and a secondary rate limit on a check run are retried
    github.fail_once("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments", status=502)
    github.fail_once("POST", "/repos/{owner}/{repo}/check-runs", status=403, headers={"retry-after": "3"},
                     message="You have exceeded a secondary rate limit")
    assert bot("pull_request", opened, default_pr_start="2024-01-01") == 0
    assert len(github.sent("POST", r"/issues/2/comments$")) == 1
    assert "<!-- meshbot:pr-comment" in bot.comment and "shop.customer_revenue" in bot.comment
    assert f"`{ENV}`" in bot.comment and re.search(r"^\+ +SUM\(.*amount`?\) \* 2 AS", bot.comment, re.M)
    assert (bot.conclusion(UNIT), bot.conclusion(PR_ENV), bot.conclusion(PROD_PLAN)) == ("success",) * 3
    assert bot.conclusion(APPROVAL) == "failure" and repo.check(APPROVAL)["head_sha"] == HEAD_A
    assert ENV in bot.context.environment_names()
    # the backfilled PR environment's tables are compared with prod (prod is the base)
    revenue = _revenue(shop)
    changed_line = f"shop.customer_revenue: {len(revenue)} changed, 0 only in prod, 0 only in PR, 0 matched"
    assert "### Data differences against prod" in bot.comment, bot.comment
    assert changed_line in bot.comment and "read from the PR environment's table" in bot.comment
    assert "| revenue | 0.0% |" in bot.comment and "| name | 100.0% |" in bot.comment
    # the status names what is missing, the comment links the run and its checks, says who can approve and
    # where to query the PR's version of the changed model; the changes table is shown once (prod preview)
    assert bot.outputs.values["created_pr_environment"] == "true"
    assert "checks passed" not in bot.comment and "waiting" in bot.comment and "Required Approval" in bot.comment
    assert f"[Workflow run]({RUN_URL})" in bot.comment and "](https://github.com/" in bot.comment
    assert "Who can approve: @ann-gh" in bot.comment
    assert f"`shop__{ENV}.customer_revenue`" in bot.comment
    assert bot.comment.count("| Model | Change | Category | Kind |") == 1

    # a required approver approves the head commit
    repo.review("ann-gh", "APPROVED", HEAD_A, "2024-01-02T00:00:00Z")
    assert bot("pull_request_review", payload("pull_request_review/submitted.payload.json")) == 0
    assert bot.conclusion(APPROVAL) == "success" and "1 of 1 required approval(s) from @ann-gh" in shown(bot.comment)
    assert ":white_check_mark: meshbot checks passed" in bot.comment

    # a new push (PR environments skip backfill by default): the same comment is edited in place,
    # and the approval on the old head is stale
    pushed = _pr_event("pull_request/synchronize.payload.json", HEAD_B)
    repo.set_pull(pushed["pull_request"])
    assert bot("pull_request", pushed) == 0
    assert len(github.sent("POST", r"/issues/2/comments$")) == 1
    assert github.sent("PATCH", r"/issues/comments/1000$")[-1]["body"] == bot.comment
    assert bot.conclusion(APPROVAL) == "failure" and repo.check(APPROVAL)["head_sha"] == HEAD_B
    assert "stale" in bot.comment and bot.outputs.values["created_pr_environment"] == "false"
    # skip-backfill still compares data: the new versions are previewed (nothing written) with the
    # same figures; the breaking child without a grain gets counts and schema only
    assert changed_line in bot.comment and "computed from a preview" in bot.comment
    assert "| revenue | 0.0% |" in bot.comment and "no data was compared" not in bot.comment
    top_prod = sum(1 for value in revenue.values() if value >= 100)
    top_pr = sum(1 for value in revenue.values() if value * 2 >= 100)
    assert f"shop.top_customers: {top_prod} rows in prod, {top_pr} in PR (not matched by key)" in shown(bot.comment)
    assert "neither a grain nor a unique_key" in shown(bot.comment)

    # /deploy: refused for a reader; for a writer too while the approval is stale (checked before anything
    # of the project is read, so neither gets a reaction)
    repo.permissions.update({"reader": "read", "writer": "write"})
    assert bot("issue_comment", _comment_event("reader", "/deploy"), head=HEAD_B) == 1
    assert repo.reactions == [] and bot.replies == ["@reader ignored `/deploy`: it needs write permission on "
                                                    "this repository (yours is `read`).\n"]
    assert bot("issue_comment", _comment_event("writer", "/deploy"), head=HEAD_B) == 1
    assert repo.reactions == [] and "required approval is missing" in bot.replies[-1]

    # approved again on the new head, then merged: the push to the prod branch deploys to prod
    repo.review("ann-gh", "APPROVED", HEAD_B, "2024-01-03T00:00:00Z")
    repo.set_pull(pushed["pull_request"], merged=True, merge_sha=MERGE_SHA)
    assert bot("push", payload("push/with-new-branch.payload.json"), head=MERGE_SHA) == 0
    assert bot.conclusion(DEPLOY) == "success" and ":rocket: Deployed to `prod`" in bot.comment
    assert f"Deployed to `prod` from {MERGE_SHA[:7]} as plan `" in bot.comment and "digest `" not in bot.comment
    assert "### Deployed to `prod`" in bot.comment and "### Prod plan preview" not in bot.comment
    assert "How to deploy" not in bot.comment and bot.outputs.values["deployed_sha"] == MERGE_SHA
    assert not Context(shop).plan("prod", options=PlanOptions(skip_tests=True)).has_changes

    # closed: the environment is invalidated and its views dropped at once
    assert bot("pull_request", _pr_event("pull_request/closed.payload.json", HEAD_B)) == 0
    assert ENV not in Context(shop).environment_names()
    assert "environment `hello_world_2` was removed" in bot.comment
    assert f"shop__{ENV}" not in bot.comment and "How to deploy" not in bot.comment
    assert all("ghs_lifecycle_token" not in str(call) for call in github.calls)
