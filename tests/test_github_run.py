"""Scheduled runs through the bot: `schedule` and `workflow_dispatch` run what each model's cron made due
in prod (and the merge environment), only on a prod branch's checked-out commit, with a job summary per
environment and exit 1 on a failure; `run_on_deploy` runs right after a prod deploy. No Spark (FakeEngine)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rendered import shown
from bot.github.action import Invocation, main
from github_support import FakeEngine, git_checkout, payload

DAY = 86_400_000
JAN7 = 1_704_585_600_000


def _bot(tmp_path: Path, name: str, raw: dict | None, engine: FakeEngine, *, config: str = "",
         env: dict | None = None) -> tuple[int, str, dict[str, str]]:
    checkout = tmp_path / "checkout"
    sha = (checkout / ".sha").read_text() if (checkout / ".sha").exists() else None
    if sha is None:
        sha = git_checkout(checkout)
        (checkout / ".sha").write_text(sha)
    event = tmp_path / "event.json"
    event.write_text(json.dumps(raw if raw is not None else {"schedule": "0 * * * *"}))
    out = tmp_path / "out"
    if out.exists():
        for item in out.iterdir():
            item.unlink()
    code = main(Invocation(event_name=name, event_path=str(event), output_dir=str(out), project_path=str(checkout),
                           config=config or None),
                env={"GITHUB_REPOSITORY": "octo-org/octo-repo", "GITHUB_REF": "refs/heads/master",
                     "GITHUB_SHA": sha, **(env or {})},
                context_factory=lambda p, g: engine, out=lambda line: None)
    summary = (out / "summary.md").read_text() if (out / "summary.md").exists() else ""
    outputs = dict(line.split("=", 1) for line in (out / "outputs.env").read_text().splitlines()
                   if "=" in line) if (out / "outputs.env").exists() else {}
    return code, summary, outputs


def test_a_schedule_runs_what_is_due_in_prod_and_the_merge_environment(tmp_path):
    engine = FakeEngine(environments=("prod", "staging"))
    engine.due = {"shop.orders": [(JAN7, JAN7 + DAY), (JAN7 + DAY, JAN7 + 2 * DAY)], "shop.daily": [(JAN7, JAN7 + DAY)]}
    code, summary, outputs = _bot(tmp_path, "schedule", None, engine, config="merge_environment: staging")
    assert code == 0 and engine.runs == ["prod", "staging"] and outputs["run_status"] == "success"
    assert "| `prod` | 2 | 3 | 0 |" in summary and "| `staging` | 0 | 0 | 0 |" in summary
    assert "| shop.orders | 2 | 2024-01-07 00:00 | 2024-01-09 00:00 |" in summary
    assert "nothing due" in summary


def test_a_schedule_skips_an_environment_a_deploy_holds_and_a_dispatch_waits_its_turn(tmp_path):
    """Runs share no concurrency group with deploys (a pending deploy would be cancelled): a scheduled run
    that finds prod's deploy in flight skips it with a note, exit 0; a manual run waits for its turn."""
    engine = FakeEngine(environments=("prod", "staging"))
    engine.busy = {"prod": "the plan of `prod` (plan 1a2b3c4d) on ci-7:4242, holding environment `prod` since 10:00:00 UTC"}
    engine.due = {"shop.orders": [(JAN7, JAN7 + DAY)]}
    code, summary, outputs = _bot(tmp_path, "schedule", None, engine, config="merge_environment: staging")
    assert code == 0 and outputs["run_status"] == "success" and engine.runs == ["prod", "staging"]
    assert summary.startswith("### meshbot run: :hourglass: skipped `prod` (a plan or run was in flight)")
    assert ("| `prod` | 0 | 0 | 0 | 0.0 | skipped: the plan of `prod` (plan 1a2b3c4d) on ci-7:4242, holding "
            "environment `prod` since 10:00:00 UTC was in flight; the next run processes what is due |") in summary
    assert "| shop.orders | 1 |" in summary    # staging was not busy: it ran
    engine.due = {"shop.orders": [(JAN7, JAN7 + DAY)]}
    code, summary, _ = _bot(tmp_path, "workflow_dispatch", payload("workflow_dispatch/payload.json"), engine)
    assert code == 0 and "was in flight" not in summary and "| `prod` | 1 | 1 |" in summary


def test_a_failed_run_fails_the_job_and_names_the_model(tmp_path):
    engine = FakeEngine(environments=("prod",))
    engine.failing = {"prod"}
    code, summary, outputs = _bot(tmp_path, "workflow_dispatch", payload("workflow_dispatch/payload.json"), engine)
    assert code == 1 and outputs["run_status"] == "failure"
    assert "a run failed" in summary and "failed: model shop.orders failed" in shown(summary)


def test_a_run_of_another_branch_or_commit_is_refused_before_the_project_is_read(tmp_path):
    """workflow_dispatch can be started on any branch by a writer: a run uses prod's credentials, so it
    runs only the prod branch's code, exactly the commit the event names."""
    engine = FakeEngine(environments=("prod",))
    dispatch = copy.deepcopy(payload("workflow_dispatch/payload.json"))
    dispatch["ref"] = "refs/heads/feature"
    code, summary, _ = _bot(tmp_path, "workflow_dispatch", dispatch, engine)
    assert code == 1 and engine.runs == [] and "`refs/heads/feature` is not a prod branch" in summary
    code, summary, _ = _bot(tmp_path, "schedule", None, engine, env={"GITHUB_SHA": "9" * 40})
    assert code == 1 and engine.runs == [] and "but the commit of the event (GITHUB_SHA) is 9999999" in shown(summary)


def test_a_schedule_payload_with_a_repository_and_no_ref_runs_on_GITHUB_REF(tmp_path):
    """The payload GitHub writes for a schedule names the repository but no ref; the run's ref is
    GITHUB_REF, the default branch."""
    engine = FakeEngine(environments=("prod",))
    engine.due = {"shop.orders": [(JAN7, JAN7 + DAY)]}
    schedule = payload("schedule/payload.json")
    assert "repository" in schedule and "ref" not in schedule
    code, summary, _ = _bot(tmp_path, "schedule", schedule, engine)
    assert code == 0 and engine.runs == ["prod"] and "| `prod` | 1 | 1 |" in summary
    code, summary, _ = _bot(tmp_path, "schedule", schedule, engine, env={"GITHUB_REF": "refs/heads/feature"})
    assert code == 1 and engine.runs == ["prod"] and "`refs/heads/feature` is not a prod branch" in summary


def test_run_on_deploy_runs_what_is_due_right_after_a_prod_deploy(tmp_path):
    engine = FakeEngine(environments=("prod",))
    engine.due = {"shop.orders": [(JAN7, JAN7 + DAY)]}
    checkout = tmp_path / "checkout"
    sha = git_checkout(checkout)
    (checkout / ".sha").write_text(sha)
    push = copy.deepcopy(payload("push/payload.json"))
    push.update(ref="refs/heads/master", after=sha, deleted=False, created=False)
    code, summary, _ = _bot(tmp_path, "push", push, engine, config="run_on_deploy: true")
    assert code == 0 and engine.applied == ["prod"] and engine.runs == ["prod"]
    assert "Run after the deploy: 1 batch(es) computed." in summary


def test_a_schedule_reports_prod_drift_in_its_summary_against_the_default_branch_head(tmp_path):
    """prod was changed after the default branch's last deploy by a local plan: the run's job summary names
    the model, the plan, when and from where (a notification target hears `drift_detected`)."""
    engine = FakeEngine(environments=("prod",))
    engine.drifted = {"shop.orders": ("1", "2")}
    code, summary, _ = _bot(tmp_path, "schedule", None, engine)
    assert code == 0
    assert "Drift in `prod`" in summary and "`shop.orders`" in summary and "plan by ann@" in summary
    assert "1970-01-02 00:00 UTC" in summary
    assert engine.drift_asked == [engine.model_versions()]   # the checkout: the default branch's head
