"""`/deploy` gates and merge_method: the PR is fetched from GitHub (OpenAPI-validated mock) and must be open,
from this repository, mergeable and not blocked; refusals are replies on the PR; a successful deploy records
the deployed head and, with cicd_bot.merge_method, merges the PR at exactly that head. No Spark."""

from __future__ import annotations

import copy
import json

import pytest
import responses

from bot.github.action import Invocation, main
from github_support import (FakeEngine, FakeRepository, default_branch_config, git_checkout, install, payload,
                            pr_comment_event)

DEPLOY = "meshbot - Prod Environment Synced"
DAY = 86_400_000
ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_deploy_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
       "GITHUB_RUN_ID": "7"}


def _comment_event(body: str = "/deploy", login: str = "writer") -> dict:
    return pr_comment_event(body, login)


def _opened(head: str) -> dict:
    """The opened payload, its head being the commit the job checked out."""
    raw = copy.deepcopy(payload("pull_request/opened.payload.json"))
    raw["pull_request"]["head"]["sha"] = head
    return raw


def _pull(head: str, **changes) -> dict:
    raw = _opened(head)["pull_request"]
    for key, value in changes.items():
        if key == "head_repo":
            raw["head"]["repo"] = {**raw["head"]["repo"], "full_name": value}
    return raw


class Scenario:
    def __init__(self, tmp_path, gh, engine: FakeEngine) -> None:
        self.tmp_path, self.gh, self.engine = tmp_path, gh, engine
        self.repo = FakeRepository(gh, permissions={"writer": "write"}, default_config=default_branch_config(
            engine.config.cicd_bot, engine.config.users))
        self.outputs = tmp_path / "outputs.env"
        self.lines: list[str] = []
        self.checkout = tmp_path / "checkout"
        self.head = git_checkout(self.checkout)     # the commit the deploy job checked out

    def __call__(self, raw: dict, name: str = "issue_comment", **env: str) -> int:
        path = self.tmp_path / "event.json"
        path.write_text(json.dumps(raw))
        self.summary = self.tmp_path / "summary.md"
        return main(Invocation(event_name=name, event_path=str(path), project_path=str(self.checkout)),
                    env={**ENV, "GITHUB_OUTPUT": str(self.outputs), "GITHUB_STEP_SUMMARY": str(self.summary),
                         **env},
                    context_factory=lambda p, g: self.engine, out=self.lines.append)

    def commit(self, message: str) -> str:
        """A new commit in the job's checkout (its HEAD from now on); returns its SHA."""
        import subprocess

        (self.checkout / "change.txt").write_text(message)
        git = ["git", "-C", str(self.checkout), "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", message], check=True)
        return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()

    @property
    def replies(self) -> list[str]:
        return [c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" not in c["body"]]

    @property
    def comment(self) -> str:
        return next(c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" in c["body"])

    def output(self, key: str) -> str | None:
        found = [line.split("=", 1)[1] for line in self.outputs.read_text().splitlines()
                 if line.startswith(f"{key}=")] if self.outputs.exists() else []
        return found[-1] if found else None


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    """main() builds the real client, whose PyGithub throttles writes with time.sleep: record, never wait."""
    import time

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


@pytest.fixture
def scenario(tmp_path):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        yield lambda cicd_bot=None: Scenario(tmp_path, gh, FakeEngine({"enable_deploy_command": True,
                                                                        **(cicd_bot or {})}))
        assert not gh.errors, gh.errors


@pytest.mark.parametrize("pull, fields, reason", [
    (dict(head_repo="someone/Hello-World"), {}, "comes from the fork `someone/Hello-World`. meshbot never runs"),
    ({}, dict(mergeable=None, mergeable_state="unknown"), "GitHub is still computing whether #2 can be merged"),
    ({}, dict(mergeable=False, mergeable_state="dirty"), "#2 has merge conflicts with `master`"),
    ({}, dict(mergeable=True, mergeable_state="dirty"), "#2 has merge conflicts with `master`"),
    ({}, dict(mergeable=True, mergeable_state="blocked"), "branch protection blocks merging #2"),
    ({}, dict(state="closed"), "#2 is closed"),
])
def test_deploy_is_refused_with_a_reply_unless_the_pr_can_be_merged(scenario, pull, fields, reason):
    bot = scenario()
    bot.repo.set_pull(_pull(bot.head, **pull), **fields)
    assert bot(_comment_event()) == 1
    assert len(bot.replies) == 1 and bot.replies[0].startswith("@writer ") and reason in bot.replies[0]
    assert "None" not in bot.replies[0]
    assert bot.engine.plans == [] and bot.engine.applied == [] and bot.repo.checks == {}
    assert bot.repo.merges == [] and bot.repo.reactions == []


def test_deploy_is_refused_when_the_preview_was_built_for_another_head(scenario, tmp_path):
    bot = scenario()
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_opened(bot.head), "pull_request") == 0   # preview on the checked-out head
    bot.repo.set_pull(_pull("d" * 40))
    assert bot(_comment_event()) == 1
    assert f"built for {bot.head[:7]}, but the head of #2 is now ddddddd" in bot.replies[-1]
    assert bot.engine.applied == ["hello_world_2"]


def test_a_comment_of_the_previous_release_still_gates_the_deploy(scenario):
    """The release before the hidden records were versioned wrote them without `v=`: `/deploy` still reads
    from such a comment the head its preview was built for and the approved plan's digest."""
    import re

    bot = scenario({"require_approved_plan": True})
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_opened(bot.head), "pull_request") == 0
    comment = next(c for c in bot.repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    old = comment["body"].replace("<!-- meshbot:checks v=1 {", "<!-- meshbot:checks {")
    old = re.sub(r"<!-- meshbot:plan-digest v=1 \w+ \S+ -->",
                 "<!-- meshbot:plan-digest 0123456789abcdef shop.orders@1 -->", old)
    assert "v=1" not in old and "meshbot:checks {" in old
    comment["body"] = old
    bot.repo.set_pull(_pull("d" * 40))
    assert bot(_comment_event()) == 1
    assert f"built for {bot.head[:7]}, but the head of #2 is now ddddddd" in bot.replies[-1]
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_comment_event()) == 1
    assert "the plan differs from the approved prod plan preview (require_approved_plan)" in bot.comment
    assert "(digest 0123456789abcdef → " in bot.comment and bot.engine.applied == ["hello_world_2"]


def test_deploy_applies_the_pr_head_records_it_and_merges_with_merge_method(scenario):
    bot = scenario({"merge_method": "squash"})
    HEAD = bot.head
    bot.repo.set_pull(_pull(HEAD))
    assert bot(_opened(HEAD), "pull_request") == 0
    assert "How to deploy" in bot.comment
    assert bot(_comment_event()) == 0
    assert bot.engine.applied == ["hello_world_2", "prod"]
    assert bot.repo.merges == [{"merge_method": "squash", "sha": HEAD}]
    assert bot.output("deployed_sha") == HEAD and bot.output("merge_sha") == "c" * 40
    assert bot.repo.check(DEPLOY)["conclusion"] == "success" and bot.repo.check(DEPLOY)["head_sha"] == HEAD
    status = bot.comment.split("<!-- /meshbot:section status -->")[0]
    assert f":rocket: Deployed to `prod` from {HEAD[:7]}: plan `plan_" in status and "digest `" in status
    assert "The PR was merged (squash) as ccccccc." in status
    assert "How to deploy" not in bot.comment
    assert "[Workflow run](https://github.com/Codertocat/Hello-World/actions/runs/7)" in bot.comment
    assert all("ghs_deploy_token" not in str(call) for call in bot.gh.calls)


def test_the_push_of_a_pr_deployed_and_merged_by_deploy_keeps_its_report(scenario):
    """`/deploy` with merge_method merges the PR; the push of that merge commit finds prod up to date:
    it applies nothing and leaves the PR comment's deploy report as it was."""
    bot = scenario({"merge_method": "squash"})
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_comment_event()) == 0
    report = bot.comment
    merge = bot.commit("the squashed merge")           # the push job checks out the merge commit
    bot.repo.pull["merge_commit_sha"] = merge
    push = copy.deepcopy(payload("push/with-new-branch.payload.json"))
    push["after"] = push["head_commit"]["id"] = merge
    assert bot(push, "push") == 0
    assert bot.engine.applied == ["prod"] and bot.engine.plans == ["prod", "prod"]
    assert bot.comment == report and ":rocket: Deployed to `prod`" in report
    check = bot.repo.check(DEPLOY)
    assert check["conclusion"] == "success" and "nothing to deploy" in check["output"]["summary"]


def test_a_refused_merge_after_a_deploy_is_reported_and_fails_the_step(scenario):
    bot = scenario({"merge_method": "rebase"})
    bot.repo.set_pull(_pull(bot.head))
    bot.repo.refuse_merges(405, "Rebase merges are not allowed on this repository.")
    assert bot(_comment_event()) == 1
    assert bot.engine.applied == ["prod"]
    assert "The PR could not be merged (rebase)" in bot.comment and "Rebase merges are not allowed" in bot.comment


def test_without_merge_method_a_deploy_does_not_merge(scenario):
    bot = scenario()
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_comment_event()) == 0
    assert bot.repo.merges == [] and bot.engine.applied == ["prod"]
    assert not bot.gh.sent("PUT", r"/merge$")


def test_deploy_command_rehearsed_offline_from_an_answers_file(tmp_path):
    """Local mode takes what it would ask GitHub from --answers: the PR (mergeable), the commenter's
    permission and the reviews; without them the same /deploy is refused, naming what is missing. The
    gate settings come from the checkout's `origin/<default branch>`."""
    engine = FakeEngine()
    checkout = tmp_path / "checkout"
    head = git_checkout(checkout, {"config.yaml": default_branch_config(
        {"enable_deploy_command": True, "required_approvers": ["ann-gh"]})})
    event = tmp_path / "event.json"
    event.write_text(json.dumps(_comment_event()))
    pull = {**_pull(head), "mergeable": True, "mergeable_state": "clean"}
    answers = tmp_path / "answers.json"

    def run(**given) -> tuple[int, list[str]]:
        answers.write_text(json.dumps(given))
        lines: list[str] = []
        code = main(Invocation(event_name="issue_comment", event_path=str(event), output_dir=str(tmp_path / "out"),
                               answers=str(answers), project_path=str(checkout)), env={},
                    context_factory=lambda p, g: engine, out=lines.append)
        return code, lines

    assert run(pulls=[pull])[0] == 1 and engine.applied == []          # a reader's /deploy is refused
    assert "needs write permission" in (tmp_path / "out" / "summary.md").read_text()
    code, lines = run(permissions={"writer": "write"})
    assert code == 1 and "pull request #2 is unknown in local mode" in lines[-1] and "--answers" in lines[-1]
    code, _ = run(pulls=[pull], permissions={"writer": "write"})
    assert code == 1 and engine.applied == []                           # no approval yet
    assert "required approval is missing" in (tmp_path / "out" / "comment.md").read_text()
    approval = {"user": {"login": "ann-gh"}, "state": "APPROVED", "commit_id": head,
                "submitted_at": "2024-01-02T00:00:00Z"}
    code, _ = run(pulls=[pull], permissions={"writer": "write"}, reviews={"2": [approval]})
    assert code == 0 and engine.applied == ["prod"]
    assert "Deployed to `prod`" in (tmp_path / "out" / "comment.md").read_text()


@pytest.mark.parametrize(("text", "message"), [
    ("{", "answers (--answers) is not valid JSON"),
    ('{"pulls": [], "reviewz": {}}', "unknown key(s) reviewz"),
    ('{"pulls": [{"number": "two"}]}', "entry of the wrong shape"),
])
def test_a_bad_answers_file_is_one_clear_error(tmp_path, text, message):
    answers = tmp_path / "answers.json"
    answers.write_text(text)
    event = tmp_path / "event.json"
    event.write_text(json.dumps(_comment_event()))
    lines: list[str] = []
    code = main(Invocation(event_name="issue_comment", event_path=str(event), output_dir=str(tmp_path / "out"),
                           answers=str(answers)), env={}, context_factory=lambda p, g: FakeEngine({}),
                out=lines.append)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("::error title=meshbot::")
    assert message in lines[0] and str(answers) in lines[0]


def test_a_large_backfill_needs_a_required_approvers_explicit_yes(scenario):
    """cicd_bot.max_backfill_batches: a deploy computing more batches is refused with the per-model counts,
    unless a required approver comments `/deploy --allow-large-backfill`."""
    bot = scenario({"max_backfill_batches": 2, "required_approvers": ["ann-gh"]})
    bot.engine.batches = 3
    bot.repo.permissions.update({"ann-gh": "write"})
    bot.repo.set_pull(_pull(bot.head))
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    assert bot(_comment_event()) == 1 and bot.engine.applied == []
    check = bot.repo.check(DEPLOY)
    assert check["conclusion"] == "failure"
    assert "the plan computes 3 batches, more than cicd_bot.max_backfill_batches (2)" in check["output"]["summary"]
    assert "`shop.orders`: 3 interval(s) in 3 batch(es)" in check["output"]["summary"]
    assert bot(_comment_event("/deploy --allow-large-backfill")) == 1 and bot.engine.applied == []
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(_comment_event("/deploy --allow-large-backfill", login="ann-gh")) == 0
    assert bot.engine.applied == ["prod"]
    assert bot(_comment_event("/deploy --force")) == 0
    assert "does not know `--force`" in bot.replies[-1]


def test_max_backfill_intervals_counts_intervals_whatever_the_batch_size(scenario):
    """cicd_bot.max_backfill_intervals: 10 daily intervals in 2 batches of 5 pass a limit of 2 batches
    but not one of 7 intervals."""
    bot = scenario({"max_backfill_batches": 2, "max_backfill_intervals": 7})
    bot.engine.batches, bot.engine.batch_days = 2, 5
    bot.repo.set_pull(_pull(bot.head))
    assert bot(_comment_event()) == 1 and bot.engine.applied == []
    summary = bot.repo.check(DEPLOY)["output"]["summary"]
    assert "the plan computes 10 intervals, more than cicd_bot.max_backfill_intervals (7)." in summary
    assert "batches, more than" not in summary and "`shop.orders`: 10 interval(s) in 2 batch(es)" in summary


def test_a_backfill_above_the_executor_hours_limit_needs_a_required_approvers_explicit_yes(scenario):
    """cicd_bot.max_backfill_executor_hours: a deploy whose backfill is estimated (from recorded task time) above
    the limit is refused naming each model's estimate and the limit, unless a required approver comments
    `/deploy --allow-large-backfill`; a model without recorded task time counts as none."""
    from bot.state.api import BatchTimes

    bot = scenario({"max_backfill_executor_hours": 1, "required_approvers": ["ann-gh"]})
    bot.engine.batches = 3
    bot.repo.permissions.update({"ann-gh": "write"})
    bot.repo.set_pull(_pull(bot.head))
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    # no executor time recorded (batches from before schema 8, or Spark Connect): nothing to hold it back
    bot.engine.batch_times = {("shop.orders", "1"): BatchTimes("shop.orders", "1", batches=4, span_ms=4 * DAY,
                                                               elapsed_ms=4 * 60_000, last_ts=1)}
    assert bot(_comment_event("/deploy", login="ann-gh")) == 0 and bot.engine.applied == ["prod"]

    bot.engine.deployed, bot.engine.applied = False, []
    # half an executor-hour per batch (FULL: per batch), 3 batches: 1.5 h
    bot.engine.batch_times = {("shop.orders", "1"): BatchTimes(
        "shop.orders", "1", batches=4, span_ms=4 * DAY, elapsed_ms=4 * 60_000, last_ts=1,
        metered_batches=4, metered_span_ms=4 * DAY, executor_ms=4 * 1_800_000, bytes_read=1)}
    assert bot(_comment_event("/deploy", login="ann-gh")) == 1 and bot.engine.applied == []
    summary = bot.repo.check(DEPLOY)["output"]["summary"]
    assert ("the plan computes an estimated 1.50 executor-hours, more than cicd_bot.max_backfill_executor_hours "
            "(1).") in summary
    assert ("`shop.orders`: 3 interval(s) in 3 batch(es), ~1.50 executor-hours (from 4 timed batch(es) of an "
            "earlier version)") in summary
    assert "`/deploy --allow-large-backfill`" in summary
    assert bot(_comment_event("/deploy --allow-large-backfill")) == 1 and bot.engine.applied == []
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(_comment_event("/deploy --allow-large-backfill", login="ann-gh")) == 0
    assert bot.engine.applied == ["prod"]


def test_a_forward_only_branch_plans_forward_only_and_a_destructive_change_needs_an_approver(scenario):
    """SQLMesh's forward_only_branch_suffix: the PR environment, the prod preview and the deploy of a PR from
    `...-forward-only` are forward-only plans; `/deploy --allow-destructive-model M` (required approvers
    only) allows M's destructive change and the deploy report says who allowed it."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write"})
    opened = _opened(bot.head)
    opened["pull_request"]["head"]["ref"] = "fix-forward-only"
    pull = _pull(bot.head)
    pull["head"]["ref"] = "fix-forward-only"
    bot.repo.set_pull(pull)
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    assert bot(opened, "pull_request") == 0
    assert bot.engine.plans == ["hello_world_2", "prod"]
    assert all(options.forward_only for options in bot.engine.options)
    assert bot(_comment_event("/deploy --allow-destructive-model shop.orders")) == 1     # a writer, no approver
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(_comment_event("/deploy --allow-destructive-model shop.orders", login="ann-gh")) == 0
    deploy = bot.engine.options[-1]
    assert deploy.forward_only and deploy.allow_destructive_models == ("shop.orders",)
    assert "Destructive changes allowed for `shop.orders` by @ann-gh." in bot.repo.check(DEPLOY)["output"]["summary"]


def test_rollback_is_for_required_approvers_and_replies_with_what_it_repointed(scenario):
    """`/rollback [PLAN_ID]` rolls the merge environment back: a writer who is not a required approver, a
    reader, a fork's PR are refused before the project is opened; an approver's rollback replies with the plans
    and the views it repointed."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write", "reader": "read"})
    bot.repo.set_pull(_pull(bot.head), merged=True)
    assert bot(_comment_event("/rollback")) == 1
    assert "`/rollback` can be given by a required approver only" in bot.replies[-1]
    assert bot(_comment_event("/rollback", login="reader")) == 1
    assert "needs write permission on this repository (yours is `read`)" in bot.replies[-1]
    assert bot(_comment_event("/rollback to yesterday", login="ann-gh")) == 0
    assert "takes at most one plan id" in bot.replies[-1]
    assert bot.engine.rolled_back == [] and bot.engine.plans == []
    bot.repo.set_pull(_pull(bot.head, head_repo="someone/Hello-World"))
    assert bot(_comment_event("/rollback", login="ann-gh")) == 1
    assert "comes from the fork `someone/Hello-World`" in bot.replies[-1] and bot.engine.rolled_back == []

    bot.repo.set_pull(_pull(bot.head), merged=True)    # the job checked out the PR's head, not the default branch
    assert bot(_comment_event("/rollback", login="ann-gh")) == 1
    assert "rollback refused: the checked-out commit" in bot.replies[-1] and bot.engine.rolled_back == []
    bot.repo.set_pull(_pull("f" * 40), merged=True)     # the checkout is a default-branch commit
    assert bot(_comment_event("/rollback", login="ann-gh")) == 0
    assert bot.engine.rolled_back == [("prod", None)]
    assert ("rolled `prod` back from plan bbbbbbbb to plan aaaaaaaa's snapshots (new plan cccccccc)"
            in bot.replies[-1]) and "views repointed: `shop.orders`" in bot.replies[-1]
    assert bot(_comment_event("/rollback 1A2B3C", login="ann-gh")) == 0
    assert bot.engine.rolled_back[-1] == ("prod", "1a2b3c") and bot.engine.applied == []


def _dispatch(login: str, **inputs: str) -> dict:
    raw = copy.deepcopy(payload("workflow_dispatch/payload.json"))
    raw["repository"] = copy.deepcopy(payload("pull_request/opened.payload.json"))["repository"]
    raw["sender"]["login"] = login
    raw["inputs"] = inputs
    return raw


def test_the_deploy_workflow_dispatched_with_rollback_rolls_back_for_required_approvers_only(scenario):
    """meshbot-deploy.yml's `workflow_dispatch` with `rollback: true` (and an optional `rollback_to`) rolls the
    merge environment back, with /rollback's gates: write permission and a required approver, a checkout of the
    default branch that is exactly the event's commit; the job summary says what was repointed. Unticked, the
    dispatch is a scheduled-style run."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write", "reader": "read"})
    assert bot(_dispatch("writer", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "a rollback can be started by a required approver only" in bot.summary.read_text()
    assert bot(_dispatch("reader", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "needs write permission on this repository (yours is `read`)" in bot.summary.read_text()
    assert bot(_dispatch("ann-gh", rollback="true", rollback_to="last week"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert "`rollback_to` must be a plan id" in bot.summary.read_text()
    assert bot(_dispatch("ann-gh", rollback="true"), "workflow_dispatch", GITHUB_SHA="9" * 40) == 1
    assert "the commit of the event (GITHUB_SHA) is 9999999" in bot.summary.read_text()
    bot.repo.released_on_default_branch = False
    assert bot(_dispatch("ann-gh", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "rollback refused: the checked-out commit" in bot.summary.read_text()
    assert bot.engine.rolled_back == [] and bot.engine.plans == []

    bot.repo.released_on_default_branch = True
    assert bot(_dispatch("ann-gh", rollback="true", rollback_to="1A2B3C"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert bot.engine.rolled_back == [("prod", "1a2b3c")] and bot.engine.applied == []
    assert "rolled `prod` back from plan bbbbbbbb to plan 1a2b3c's snapshots" in bot.summary.read_text()
    assert bot(_dispatch("ann-gh", rollback="false"), "workflow_dispatch", GITHUB_SHA=bot.head) == 0
    assert "### meshbot run" in bot.summary.read_text().rpartition("rolled `prod` back")[2]
    assert len(bot.engine.rolled_back) == 1
    assert bot.repo.comments == []


@pytest.mark.parametrize("check", [True, False])
def test_check_if_blocked_on_deploy_to_prod_false_deploys_a_pr_branch_protection_blocks(scenario, check):
    """SQLMesh's setting: with it off, `mergeable_state: blocked` no longer refuses /deploy (other gates stay)."""
    bot = scenario({"check_if_blocked_on_deploy_to_prod": check})
    bot.repo.set_pull(_pull(bot.head), mergeable=True, mergeable_state="blocked")
    if check:
        assert bot(_comment_event()) == 1 and bot.engine.applied == []
        assert "check_if_blocked_on_deploy_to_prod: false deploys anyway" in bot.replies[-1]
    else:
        assert bot(_comment_event()) == 0 and bot.engine.applied == ["prod"]
