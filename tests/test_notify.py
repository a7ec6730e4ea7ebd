"""notification_targets: parsed from config.yaml and config.py, posted to a real HTTP receiver on loopback by the
CLI and by the GitHub bot (deploy, scheduled run), never carrying a secret; a failing target costs one warning,
never the exit code. No Spark (the CLI run fails before Spark starts; the bot runs on FakeEngine)."""

from __future__ import annotations

import copy
import json
import socket
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import responses
from click.testing import CliRunner

from bot.cli.app import cli
from bot.errors import ConfigError, EngineError
from bot.github.action import Invocation, main
from bot.project.config import load_config
from bot.project.notifications import NotificationTarget, parse_notification_targets
from bot.report.notify import Notifier, Origin
from github_support import FakeEngine, FakeRepository, default_branch_config, git_checkout, install, payload, \
    pr_comment_event

TOKEN = "tok-4f9a2c1e"             # in the Slack URL's query: a credential
HEADER_SECRET = "hdr-b7e3d05a91"   # an Authorization header value
RUN_URL = "https://github.com/Codertocat/Hello-World/actions/runs/7"


class Receiver:
    """An HTTP server on 127.0.0.1 (ephemeral port, its own thread) recording each POST; paths under
    /fail answer 500."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def do_POST(self) -> None:   # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append((self.path, dict(self.headers), body))
                self.send_response(500 if self.path.startswith("/fail") else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def bodies(self, prefix: str) -> list[dict]:
        return [json.loads(body) for path, _, body in self.requests if path.startswith(prefix)]

    def raw(self) -> str:
        return "\n".join(body.decode() for _, _, body in self.requests)


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


def _refused_url() -> str:
    """A loopback port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


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
    url: {_refused_url()}
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
    assert f"Workflow run: {RUN_URL}" in slack[0]["text"] and slack[0]["blocks"][0]["type"] == "section"
    assert len(receiver.bodies("/fail")) == 2                       # retried once
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: notification")]
    assert len(warnings) == 2, result.stderr
    assert any("connection failed" in w for w in warnings) and any("HTTP 500" in w for w in warnings)
    assert "meshbot run failed for environment `prod`." in result.stderr   # the console target
    headers = [h for path, h, _ in receiver.requests if path == "/json"]
    assert all(h["Authorization"] == f"Bearer {HEADER_SECRET}" for h in headers)
    assert TOKEN not in receiver.raw() and HEADER_SECRET not in receiver.raw() and TOKEN not in result.output


# -- the GitHub bot --------------------------------------------------------------------------------------

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
    """`/deploy` on PR #2 through the bot (GitHub answered by the OpenAPI-validated mock); (exit code, head)."""
    import time

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_passthru("http://127.0.0.1")
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"writer": "write"},
                              default_config=default_branch_config(engine.config.cicd_bot))
        head = git_checkout(tmp_path / "checkout")
        opened = copy.deepcopy(payload("pull_request/opened.payload.json"))
        opened["pull_request"]["head"]["sha"] = head
        repo.set_pull(opened["pull_request"])
        lines: list[str] = []
        event = tmp_path / "event.json"
        code = 0
        for name, raw in (("pull_request", opened), ("issue_comment", pr_comment_event("/deploy", "writer"))):
            event.write_text(json.dumps(raw))
            sleep, time.sleep = time.sleep, lambda seconds: None   # PyGithub's write throttle
            try:
                code = main(Invocation(event_name=name, event_path=str(event), project_path=str(tmp_path / "checkout")),
                            env=ENV, context_factory=lambda p, g: engine, out=lines.append)
            finally:
                time.sleep = sleep
        assert not gh.errors, gh.errors
    return code, head, lines


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
    assert f"Commit: {head[:12]}, PR #2 (Codertocat/Hello-World)" in text and f"Workflow run: {RUN_URL}" in text
    assert TOKEN not in receiver.raw() and HEADER_SECRET not in receiver.raw()


def test_a_successful_deploy_keeps_exit_0_when_targets_refuse_or_fail(tmp_path, receiver, capsys):
    broken = (NotificationTarget("webhook", frozenset({"apply_end"}), url=_refused_url(), config_key="t[2]"),
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
                           project_path=str(checkout)),
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


# -- the Notifier itself -----------------------------------------------------------------------------------

def test_audit_failures_in_an_apply_are_their_own_event(receiver):
    from bot.errors import QualityError
    from bot.quality.api import AuditResult

    target = NotificationTarget("webhook", frozenset({"audit_failure", "apply_failure"}), url=f"{receiver.base}/json")
    failed = AuditResult(audit="not_null", model="shop.orders", blocking=True, violation_count=3)
    Notifier([target], origin=Origin(commit="c" * 40)).failed(
        "apply", "prod", QualityError("1 blocking audit(s) failed", failures=(failed,)), models=("shop.orders", "x.y"))
    audit, apply = receiver.bodies("/json")
    assert (audit["event"], audit["models"]) == ("audit_failure", ["shop.orders"])
    assert (apply["event"], apply["models"]) == ("apply_failure", ["shop.orders", "x.y"])
