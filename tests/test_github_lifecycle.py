"""A whole PR lifecycle on local Spark with the real Context and real payloads, in local output mode.

open → comment and checks; push → same comment updated; approval → check passes; stale after a push;
merge → deploy to prod; close → environment gone.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

pytest.importorskip("bot.plan.runner", reason="Context.apply is not wired yet")

from bot.context import Context  # noqa: E402
from bot.github.event import Review, parse_event  # noqa: E402
from bot.github.local import LocalOutput, StepOutputs  # noqa: E402
from bot.github.runners import RUNNERS, BotRun  # noqa: E402
from bot.github.settings import load_settings  # noqa: E402
from bot.project.example import write_example  # noqa: E402
from github_support import payload  # noqa: E402

CONFIG_EXTRA = """
cicd_bot:
  skip_pr_backfill: false
  deploy_on: merge
users:
  - username: ann
    github_username: ann-gh
    roles: [required_approver]
"""


@pytest.fixture
def project(tmp_path, clean_catalog):
    root = tmp_path / "shop"
    write_example(root)
    with (root / "config.yaml").open("a") as handle:
        handle.write(CONFIG_EXTRA)
    context = Context(root)
    context.apply(context.plan("prod"))
    model = root / "models" / "customer_revenue.sql"
    model.write_text(model.read_text().replace("SUM(o.amount) AS revenue", "SUM(o.amount) * 2 AS revenue"))
    yield root, Context(root)


def _run(context, out, raw, name, *, reviews=()):
    event = parse_event(name, raw)
    pulls = (event.pull_request,) if event.pull_request else ()
    github = LocalOutput(out, pull_requests=pulls + _PULLS, reviews=tuple(reviews))
    settings = load_settings(context.config.cicd_bot, context.config.users)
    run = BotRun(event=event, settings=settings, github=github, context=context,
                 outputs=StepOutputs.in_folder(out))
    return RUNNERS["run-all"](run), github


_PULLS: tuple = ()


def test_pull_request_lifecycle(project, tmp_path):
    global _PULLS
    root, context = project
    out = tmp_path / "out"
    opened = payload("pull_request/opened.payload.json")
    head = opened["pull_request"]["head"]["sha"]

    code, github = _run(context, out, opened, "pull_request")
    comment = (out / "comment.md").read_text()
    assert "<!-- meshbot:pr-comment" in comment and "shop.customer_revenue" in comment
    assert github.checks["meshbot - Unit Tests"].conclusion == "success"
    assert github.checks["meshbot - PR Environment Synced"].conclusion == "success"
    assert github.checks["meshbot - Required Approval"].conclusion == "failure"
    assert "hello_world_2" in {e.name for e in context.environments()}
    assert code == 0

    approval = Review(user="ann-gh", state="APPROVED", commit_id=head, submitted_at="2024-01-01T00:00:00Z")
    review = payload("pull_request_review/submitted.payload.json")
    code, github = _run(context, out, review, "pull_request_review", reviews=[approval])
    assert github.checks["meshbot - Required Approval"].conclusion == "success"

    pushed = json.loads(json.dumps(payload("pull_request/synchronize.payload.json")))
    pushed["pull_request"]["head"]["sha"] = "f" * 40
    code, github = _run(context, out, pushed, "pull_request", reviews=[approval])
    assert github.checks["meshbot - Required Approval"].conclusion == "failure"   # stale approval
    assert (out / "comment.md").read_text().count("<!-- meshbot:pr-comment") == 1

    pr = parse_event("pull_request", opened).pull_request
    _PULLS = (replace(pr, merged=True),)
    merge = payload("push/with-new-branch.payload.json")
    merge["after"] = head
    code, github = _run(context, out, merge, "push", reviews=[approval])
    assert code == 0 and github.checks["meshbot - Prod Environment Synced"].conclusion == "success"
    assert not Context(root).plan("prod").has_changes

    closed = payload("pull_request/closed.payload.json")
    code, github = _run(context, out, closed, "pull_request")
    assert "hello_world_2" not in {e.name for e in Context(root).environments()}
    assert "invalidated" in (out / "comment.md").read_text()
    _PULLS = ()
