"""bot.github.local: local mode (`meshbot github --output-dir`): no network, what GitHub would answer read
from the event and an answers file (--answers); a bad answers file or an unknown PR is one clear error."""

from __future__ import annotations

import json

import pytest

from bot.github.action import Invocation, main
from github_support import (COMMENT_EVENT, FakeEngine, NoEngine, default_branch_config, git_checkout, payload,
                            pr_comment_event, previewed_comment, pull_payload, write_event)


def test_unknown_pull_request_in_local_mode_is_a_clear_error(tmp_path):
    raw = payload(COMMENT_EVENT)
    raw["comment"]["body"] = "/deploy"
    lines: list[str] = []
    code = main(Invocation(event_name="issue_comment", event_path=write_event(tmp_path, raw),
                           output_dir=str(tmp_path / "o"), answers=_write_answers(tmp_path, chhsia0="write")),
                env={"MESHBOT_CICD_BOT": "enable_deploy_command: true"},
                context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1
    assert lines == ["::error title=meshbot::pull request #3 is unknown in local mode: the event payload does "
                     "not describe it and meshbot makes no network call here; add it to the `pulls` of an "
                     "answers file (--answers)"]


def _write_answers(tmp_path, **permissions: str) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"permissions": permissions}))
    return str(path)


def test_deploy_command_rehearsed_offline_from_an_answers_file(tmp_path):
    """Local mode takes what it would ask GitHub from --answers: the PR (mergeable), the commenter's
    permission and the reviews; without them the same /deploy is refused, naming what is missing. The
    gate settings come from the checkout's `origin/<default branch>`."""
    engine = FakeEngine()
    checkout = tmp_path / "checkout"
    head = git_checkout(checkout, {"config.yaml": default_branch_config(
        {"enable_deploy_command": True, "required_approvers": ["ann-gh"]})})
    event = tmp_path / "event.json"
    event.write_text(json.dumps(pr_comment_event()))
    pull = {**pull_payload(head), "mergeable": True, "mergeable_state": "clean"}
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
    assert code == 1 and engine.applied == []                           # no preview of the head yet
    assert "has no prod plan preview for its head" in (tmp_path / "out" / "summary.md").read_text()
    (tmp_path / "out" / "comment.md").write_text(previewed_comment(head))      # as the PR's sync leaves it
    code, _ = run(pulls=[pull], permissions={"writer": "write"})
    assert code == 1 and engine.applied == []                           # no approval yet
    assert "required approval is missing" in (tmp_path / "out" / "replies.md").read_text()
    approval = {"user": {"login": "ann-gh"}, "state": "APPROVED", "commit_id": head,
                "submitted_at": "2024-01-02T00:00:00Z"}
    code, _ = run(pulls=[pull], permissions={"writer": "write"}, reviews={"2": [approval]})
    assert code == 0 and engine.applied == ["prod"], (tmp_path / "out" / "comment.md").read_text() + (tmp_path / "out" / "summary.md").read_text()
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
    event.write_text(json.dumps(pr_comment_event()))
    lines: list[str] = []
    code = main(Invocation(event_name="issue_comment", event_path=str(event), output_dir=str(tmp_path / "out"),
                           answers=str(answers)), env={}, context_factory=lambda p, g: FakeEngine({}),
                out=lines.append)
    assert code == 1 and len(lines) == 1 and lines[0].startswith("::error title=meshbot::")
    assert message in lines[0] and str(answers) in lines[0]
