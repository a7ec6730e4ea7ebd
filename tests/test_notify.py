"""notification_targets: parsed from config.yaml and config.py, posted to a real HTTP receiver on loopback by the
CLI, never carrying a secret; a failing target costs one warning, never the exit code. No Spark (the CLI run
fails before Spark starts). The GitHub bot's notifications (deploy, scheduled run): test_github_notify.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.errors import ConfigError
from bot.project.config import load_config
from bot.project.notifications import NotificationTarget
from bot.report.notify import Notifier, Origin
from github_support import HEADER_SECRET, RUN_URL, TOKEN, Receiver, receiver, refused_url  # noqa: F401 (a fixture)


def _targets(receiver: Receiver) -> str:
    return f"""
notification_targets:
  - type: slack_webhook
    url: "{{{{ env_var('SLACK_URL') }}}}"
    notify_on: [apply_start, apply_end, apply_failure, run_failure, audit_failure]
  - type: webhook
    url: {receiver.base}/json
    headers: {{Authorization: "Bearer {HEADER_SECRET}"}}
    notify_on: [apply_failure, run_start, run_failure]
"""


def _project(tmp_path: Path, extra: str) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text("model_defaults:\n  dialect: spark\n" + extra)
    return root


# -- config --------------------------------------------------------------------------------------------

def test_targets_are_read_from_config_yaml_and_their_secrets_registered(tmp_path, receiver):
    root = _project(tmp_path, _targets(receiver))
    config = load_config(root, environ={"SLACK_URL": f"{receiver.base}/slack?token={TOKEN}"})
    slack, hook = config.notification_targets
    assert slack.type == "slack_webhook" and slack.wants("apply_failure") and not slack.wants("run_start")
    assert hook.type == "webhook" and hook.headers == (("Authorization", f"Bearer {HEADER_SECRET}"),)
    assert TOKEN not in repr(config) and HEADER_SECRET not in repr(config)
    from bot.redact import redact
    assert redact(f"{hook.url} {TOKEN} {HEADER_SECRET}") == "*** *** ***"


def test_config_py_targets_through_the_sqlmesh_shim(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "config.py").write_text(
        "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
        "from sqlmesh.core.notification_target import (ConsoleNotificationTarget, NotificationEvent,\n"
        "                                               SlackWebhookNotificationTarget)\n"
        "config = Config(model_defaults=ModelDefaultsConfig(dialect='spark'), notification_targets=[\n"
        "    SlackWebhookNotificationTarget(notify_on=[NotificationEvent.RUN_FAILURE, 'apply_end'],\n"
        "                                   url='https://hooks.slack.com/services/T0/B0/secretpath'),\n"
        "    ConsoleNotificationTarget(notify_on={NotificationEvent.AUDIT_FAILURE}),\n"
        "    {'type': 'webhook', 'url': 'https://example.com/hook', 'notify_on': ['run_end']},\n"
        "])\n")
    slack, console, hook = load_config(root).notification_targets
    assert (slack.type, slack.notify_on) == ("slack_webhook", frozenset({"run_failure", "apply_end"}))
    assert (console.type, console.notify_on) == ("console", frozenset({"audit_failure"}))
    assert hook.type == "webhook" and hook.url == "https://example.com/hook"


@pytest.mark.parametrize("target, message", [
    ("{type: pagerduty, notify_on: [run_failure]}",
     "`notification_targets[0].type`: unknown notification target type `pagerduty`"),
    ("{type: console, notify_on: [run_failed]}",
     "`notification_targets[0].notify_on`: unknown event(s) run_failed"),
    ("{type: smtp, host: mail, notify_on: [run_failure]}",
     "`notification_targets[0].type`: `smtp` targets (email over SMTP) are not supported by meshbot"),
    ("{type: webhook, notify_on: [run_failure]}", "`notification_targets[0].url` is required"),
])
def test_an_unknown_type_or_event_is_an_error_naming_the_file_and_key(tmp_path, target, message):
    root = _project(tmp_path, f"notification_targets:\n  - {target}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(root)
    assert str(caught.value).startswith(f"{root / 'config.yaml'}: ") and message in str(caught.value)
    result = CliRunner().invoke(cli, ["-p", str(root), "run"])
    assert result.exit_code == 1 and message in result.output and "config.yaml" in result.output


# -- the CLI -------------------------------------------------------------------------------------------

def test_cli_run_failure_reaches_each_target_and_failing_targets_only_warn(tmp_path, receiver):
    """`meshbot run` of an environment never applied fails before Spark starts: run_start and run_failure
    are posted; a refused and a 500 target give one warning each; the exit code is the one without targets."""
    plain = _project(tmp_path / "plain", "")
    baseline = CliRunner().invoke(cli, ["-p", str(plain), "run", "prod"])
    failing = f"""
  - type: webhook
    url: {refused_url()}
    notify_on: [run_failure]
  - type: slack_webhook
    url: {receiver.base}/fail
    notify_on: [run_failure]
  - type: console
    notify_on: [run_failure]
"""
    root = _project(tmp_path, _targets(receiver) + failing)
    env = {"SLACK_URL": f"{receiver.base}/slack?token={TOKEN}", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
           "GITHUB_RUN_ID": "7", "GITHUB_SHA": "a" * 40}
    result = CliRunner().invoke(cli, ["-p", str(root), "run", "prod"], env=env)
    assert baseline.exit_code == result.exit_code == 1
    hook = receiver.bodies("/json")
    assert [b["event"] for b in hook] == ["run_start", "run_failure"]
    failure = hook[1]
    assert failure["environment"] == "prod" and failure["status"] == "failure" and failure["run_url"] == RUN_URL
    assert failure["commit"] == "a" * 40 and "prod" in failure["error"]
    slack = receiver.bodies("/slack")
    assert len(slack) == 1 and slack[0]["text"].startswith("meshbot run failed for environment `prod`.")
    assert f"Workflow run: <{RUN_URL}>" in slack[0]["text"] and slack[0]["blocks"][0]["type"] == "section"
    assert len(receiver.bodies("/fail")) == 2                       # retried once
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: notification")]
    assert len(warnings) == 2, result.stderr
    assert any("connection failed" in w for w in warnings) and any("HTTP 500" in w for w in warnings)
    assert "meshbot run failed for environment `prod`." in result.stderr   # the console target
    headers = [h for path, h, _ in receiver.requests if path == "/json"]
    assert all(h["Authorization"] == f"Bearer {HEADER_SECRET}" for h in headers)
    assert TOKEN not in receiver.raw() and HEADER_SECRET not in receiver.raw() and TOKEN not in result.output


# -- the Notifier itself -----------------------------------------------------------------------------------

def test_audit_failures_in_an_apply_are_their_own_event(receiver):
    from bot.errors import QualityError
    from bot.quality.results import AuditResult

    target = NotificationTarget("webhook", frozenset({"audit_failure", "apply_failure"}), url=f"{receiver.base}/json")
    failed = AuditResult(audit="not_null", model="shop.orders", blocking=True, violation_count=3)
    Notifier([target], origin=Origin(commit="c" * 40)).failed(
        "apply", "prod", QualityError("1 blocking audit(s) failed", failures=(failed,)), models=("shop.orders", "x.y"))
    audit, apply = receiver.bodies("/json")
    assert (audit["event"], audit["models"]) == ("audit_failure", ["shop.orders"])
    assert (apply["event"], apply["models"]) == ("apply_failure", ["shop.orders", "x.y"])
