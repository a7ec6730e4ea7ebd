"""bot.github.runners.notify: the bot's notifications reach a real HTTP receiver on loopback with the PR, commit and
workflow run of a deploy or a scheduled run, never carrying a secret; a failing target costs one `::warning`, never
the exit code. No Spark (the bot runs on FakeEngine). Parsing targets and the CLI's notifications: test_notify.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import responses

from bot.errors import EngineError
from bot.github.action import Invocation, main
from bot.project.notifications import NotificationTarget, parse_notification_targets
from github_support import (HEADER_SECRET, RUN_URL, TOKEN, FakeEngine, Receiver, git_checkout, play,  # noqa: F401
                            pr_comment_event, receiver, refused_url)


class FailingEngine(FakeEngine):
    """FakeEngine with notification targets whose prod apply fails, its error quoting a secret."""

    def __init__(self, targets: tuple[NotificationTarget, ...], **kwargs) -> None:
        super().__init__(**kwargs)
        self._config = replace(self._config, notification_targets=targets)
        self.apply_fails = True

    def apply(self, plan, *, progress=None):
        if plan.environment == "prod" and self.apply_fails:
            raise EngineError(f"model `shop.orders` failed: Spark refused credentials {HEADER_SECRET}")
        return super().apply(plan, progress=progress)


def _bot_targets(receiver: Receiver, *extra: NotificationTarget) -> tuple[NotificationTarget, ...]:
    """Read as config.yaml's would be (which registers their secrets), plus `extra`."""
    events = ["apply_failure", "apply_end", "run_failure"]
    return parse_notification_targets([
        {"type": "slack_webhook", "url": f"{receiver.base}/slack?token={TOKEN}", "notify_on": events},
        {"type": "webhook", "url": f"{receiver.base}/json", "notify_on": events,
         "headers": {"Authorization": f"Bearer {HEADER_SECRET}"}}], Path("config.yaml")) + extra


ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_deploy_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_RUN_ID": "7"}


def _deploy(tmp_path: Path, engine: FakeEngine) -> tuple[int, str, list[str]]:
    """`/deploy` on PR #2 through the bot after its sync; (exit code of the deploy, head, log lines)."""
    played = play(tmp_path, engine, [("pull_request", None), ("issue_comment", pr_comment_event("/deploy", "writer"))],
                  env=ENV)
    return played.codes[-1], played.head, played.lines


def test_a_failed_deploy_is_posted_to_slack_and_the_webhook_with_pr_commit_and_run(tmp_path, receiver):
    engine = FailingEngine(_bot_targets(receiver), cicd_bot={"enable_deploy_command": True})
    code, head, _ = _deploy(tmp_path, engine)
    assert code == 1
    (hook,) = receiver.bodies("/json")
    assert hook["event"] == "apply_failure" and hook["environment"] == "prod" and hook["models"] == ["shop.orders"]
    assert hook["pull_request"] == 2 and hook["commit"] == head and hook["run_url"] == RUN_URL
    assert hook["repository"] == "Codertocat/Hello-World" and "Spark refused credentials ***" in hook["error"]
    (slack,) = receiver.bodies("/slack")
    text = slack["text"]
    assert text.startswith("Plan apply failed for environment `prod`.") and "Models: shop.orders" in text
    assert f"Commit: {head[:12]}, PR #2 (Codertocat/Hello-World)" in text and f"Workflow run: <{RUN_URL}>" in text
    assert TOKEN not in receiver.raw() and HEADER_SECRET not in receiver.raw()


def test_a_successful_deploy_keeps_exit_0_when_targets_refuse_or_fail(tmp_path, receiver, capsys):
    broken = (NotificationTarget("webhook", frozenset({"apply_end"}), url=refused_url(), config_key="t[2]"),
              NotificationTarget("slack_webhook", frozenset({"apply_end"}), url=f"{receiver.base}/fail",
                                 config_key="t[3]"))
    engine = FailingEngine(_bot_targets(receiver, *broken), cicd_bot={"enable_deploy_command": True})
    engine.apply_fails = False
    code, head, _ = _deploy(tmp_path, engine)
    assert code == 0 and engine.applied == ["hello_world_2", "prod"]
    assert [b["event"] for b in receiver.bodies("/json")] == ["apply_end"]
    assert receiver.bodies("/slack")[0]["text"].startswith("Plan apply finished for environment `prod`.")
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("::warning")]
    assert len(warnings) == 2 and "t[2] (webhook, 127.0.0.1) failed: connection failed" in warnings[0]
    assert "t[3] (slack_webhook, 127.0.0.1) failed: HTTP 500" in warnings[1]


def test_a_failed_scheduled_run_is_posted_with_its_commit_and_run(tmp_path, receiver):
    engine = FailingEngine(_bot_targets(receiver), environments=("prod",))
    engine.failing = {"prod"}
    checkout = tmp_path / "checkout"
    sha = git_checkout(checkout)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"schedule": "0 * * * *"}))
    code = main(Invocation(event_name="schedule", event_path=str(event), output_dir=str(tmp_path / "out"),
                           project_path=str(checkout), notify=True),
                env={"GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_REF": "refs/heads/master",
                     "GITHUB_SHA": sha, "GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "7"},
                context_factory=lambda p, g: engine, out=lambda line: None)
    assert code == 1 and engine.runs == ["prod"]
    (hook,) = receiver.bodies("/json")
    assert hook["event"] == "run_failure" and hook["environment"] == "prod" and hook["commit"] == sha
    assert hook["run_url"] == RUN_URL and "model `shop.orders` failed" in hook["error"]
    (slack,) = receiver.bodies("/slack")
    assert slack["text"].startswith("meshbot run failed for environment `prod`.") and sha[:12] in slack["text"]
    assert TOKEN not in receiver.raw() and HEADER_SECRET not in receiver.raw()


@pytest.mark.parametrize("notify", [False, True])
def test_local_mode_posts_to_no_target_unless_asked(tmp_path, capsys, monkeypatch, notify):
    """Local mode (`--output-dir`) makes no network call: a rehearsed scheduled run tells the console
    target and leaves the Slack and webhook targets untold, saying so and how to send them; `--notify`
    (the CLI's flag) sends them."""
    from click.testing import CliRunner

    import bot.github.cli as github_cli
    from bot.cli import cli

    targets = parse_notification_targets([
        {"type": "slack_webhook", "url": "https://hooks.slack.com/services/T0/B0/x", "notify_on": ["run_end"]},
        {"type": "webhook", "url": "https://hooks.example.com/meshbot", "notify_on": ["run_end"]},
        {"type": "console", "notify_on": ["run_end"]}], Path("config.yaml"))
    engine = FailingEngine(targets, environments=("prod",))
    real_main = github_cli.main   # the CLI as it is, on the FakeEngine
    monkeypatch.setattr(github_cli, "main", lambda invocation, **kw: real_main(
        invocation, context_factory=lambda p, g: engine, **kw))
    checkout = tmp_path / "checkout"
    sha = git_checkout(checkout)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"schedule": "0 * * * *"}))
    out = tmp_path / "out"
    args = ["github", "--event-name", "schedule", "--event-path", str(event), "--output-dir", str(out),
            "--project-path", str(checkout), *(["--notify"] if notify else []), "run"]
    env = {"GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_REF": "refs/heads/master", "GITHUB_SHA": sha}
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        for url in (t.url for t in targets if t.url):
            rsps.add(responses.POST, url, json={})
        result = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
        posted = sorted(call.request.url for call in rsps.calls)
    assert result.exit_code == 0, result.output
    assert engine.runs == ["prod"]
    summary = (out / "summary.md").read_text()
    skipped = ("meshbot: local mode posts to no notification target, so 2 targets of config.yaml "
               "(`notification_targets[0]: slack_webhook, notification_targets[1]: webhook`) were not told; "
               "run `meshbot github --notify ...` to send them.")
    if notify:
        assert posted == ["https://hooks.example.com/meshbot", "https://hooks.slack.com/services/T0/B0/x"]
        assert skipped not in summary and skipped not in result.output
    else:
        assert posted == []
        assert skipped in summary and skipped in result.output
    assert "meshbot run finished for environment `prod`" in capsys.readouterr().err + result.output
