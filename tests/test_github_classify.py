"""bot.github.classify: what each event asks of the bot, decided from the payload and the trusted settings alone.

The refusals of bot.github.authorize (a fork, a reader, a moved head, a release off the default branch) are tried
end to end in test_github_trust.py and test_github_deploy.py."""

from __future__ import annotations

import pytest

from bot.github.event import parse_event
from bot.github.classify import DeployOptions, Step, classify
from bot.github.settings import load_settings
from github_support import payload, pr_comment_event


@pytest.mark.parametrize("name, raw, settings, step", [
    ("pull_request", payload("pull_request/opened.payload.json"), {}, Step.SYNC),
    ("pull_request", payload("pull_request/closed.payload.json"), {}, Step.CLEANUP),
    ("pull_request", payload("_supplementary/ailisp__reallyfastci/test/data/webhook/webhook-pr-from-fork.json"),
     {}, Step.NOTHING),
    ("pull_request_review", payload("pull_request_review/submitted.payload.json"), {}, Step.APPROVAL),
    ("issue_comment", pr_comment_event("nice PR", "reader"), {"enable_deploy_command": True}, Step.NOTHING),
    ("issue_comment", pr_comment_event("/deploy", "writer"), {}, Step.REPLY),          # disabled: a reply
    ("issue_comment", pr_comment_event("/deploy", "writer"), {"enable_deploy_command": True}, Step.DEPLOY),
    ("issue_comment", pr_comment_event("/help", "writer"), {}, Step.REPLY),
    ("issue_comment", pr_comment_event("/deploy", "github-actions[bot]"), {"enable_deploy_command": True},
     Step.NOTHING),
    ("push", payload("push/payload.json"), {}, Step.NOTHING),                                  # a deleted ref
    ("push", {**payload("push/payload.json"), "deleted": False, "ref": "refs/heads/master"}, {}, Step.DEPLOY),
    ("push", {**payload("push/payload.json"), "deleted": False, "ref": "refs/heads/feature"}, {}, Step.NOTHING),
    ("release", payload("release/published.payload.json"), {}, Step.NOTHING),                 # deploy_on: merge
    ("release", payload("release/published.payload.json"), {"deploy_on": "tag"}, Step.DEPLOY),
])
def test_every_event_is_classified_from_the_payload_and_trusted_settings_alone(name, raw, settings, step):
    assert classify(parse_event(name, raw), load_settings(settings)).step is step


def test_a_commands_options_arrive_typed():
    settings = load_settings({"enable_deploy_command": True})
    deploy = classify(parse_event("issue_comment", pr_comment_event(
        "/deploy --allow-drift --allow-destructive-model shop.orders --allow-destructive-model=shop.items", "w")),
        settings)
    assert (deploy.step, deploy.command) == (Step.DEPLOY, True)
    assert deploy.deploy == DeployOptions(allow_drift=True, allow_destructive=("shop.orders", "shop.items"))
    assert deploy.deploy.names == ("--allow-drift", "--allow-destructive-model")
    rollback = classify(parse_event("issue_comment", pr_comment_event("/rollback 0A1B", "w")), settings)
    assert (rollback.step, rollback.rollback_to, rollback.deploy) == (Step.ROLLBACK, "0a1b", DeployOptions())
    previous = classify(parse_event("issue_comment", pr_comment_event("/rollback", "w")), settings)
    assert (previous.step, previous.rollback_to) == (Step.ROLLBACK, None)
