"""The Action's trust boundary, tried as an attacker would: no pull request code runs before the event is
authorized, gate settings come from the default branch or the action's input (never the PR's files), a
`/deploy` deploys exactly the authorized head, a release deploys only a commit of the default branch.

Real webhook payloads; GitHub through the real client against the OpenAPI-validated mock, or local mode
with a real git checkout; the project is the real Context on a project whose config.py, macro and Python
model each leave a marker file when they run.

End to end: event → gate → runners → comment, check runs and outputs (the trust decisions of one module are
also in its own file: test_github_gate, test_github_trusted, test_github_dispatch, test_github_base)."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path

import pytest
import responses

from rendered import shown
from bot.github.action import Invocation, main
from github_support import (FakeEngine, FakeRepository, default_branch_config, git_checkout, install,  # noqa: F401
                            no_waiting, payload, pr_comment_event, previewed_comment, write_event)

API_ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_trust_token", "GITHUB_API_URL": "https://api.github.com"}
FORK = "someone/Hello-World"
pytestmark = pytest.mark.usefixtures("no_waiting")


def hostile_project(root: Path, markers: Path) -> dict[str, str]:
    """A project whose config.py, macros/*.py and Python model each write a marker file when loaded."""
    def leave(name: str) -> str:
        return f"from pathlib import Path\nPath({str(markers / name)!r}).write_text('ran')\n"

    return {
        "config.py": leave("config.py") + (
            "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
            "config = Config(model_defaults=ModelDefaultsConfig(dialect='spark'))\n"),
        "macros/steal.py": leave("macro") + "from sqlmesh import macro\n\n@macro()\ndef one(evaluator):\n    return 1\n",
        "models/steal.py": leave("python_model") + (
            "from sqlmesh import model\n\n"
            "@model('shop.steal', columns={'a': 'int'})\n"
            "def execute(context, **kwargs):\n    return None\n"),
        "models/orders.sql": "MODEL (name shop.orders, kind FULL);\nSELECT 1 AS a\n",
    }


def _fork_pull(head: str, **fields) -> dict:
    raw = copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"])
    raw["head"]["sha"] = head
    raw["head"]["repo"] = {**raw["head"]["repo"], "full_name": FORK}
    return raw


@pytest.mark.parametrize("login, body, permission", [
    ("reader", "nice PR", "read"),          # any comment starts the job: nothing may run for it
    ("writer", "/deploy", "write"),          # a writer's /deploy of a fork's PR
    ("reader", "/deploy", "read"),           # a reader's /deploy
])
def test_no_pull_request_code_runs_for_a_comment_before_it_is_authorized(tmp_path, login, body, permission):
    markers = tmp_path / "markers"
    markers.mkdir()
    checkout = tmp_path / "checkout"
    head = git_checkout(checkout, hostile_project(checkout, markers))
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={login: permission},
                              default_config=default_branch_config({"enable_deploy_command": True}))
        repo.set_pull(_fork_pull(head), mergeable=True, mergeable_state="clean")
        code = main(Invocation(event_name="issue_comment", project_path=str(checkout),
                               event_path=write_event(tmp_path, pr_comment_event(body, login))),
                    env={**API_ENV, "MESHBOT_STATE_PASSWORD": "prod-password"}, out=lines.append)
        assert not gh.errors, gh.errors
    assert list(markers.iterdir()) == []
    assert not (checkout / ".meshbot").exists()
    assert repo.checks == {} and repo.reactions == []
    if body == "/deploy":
        assert code == 1 and len(repo.comments) == 1
        reason = "comes from the fork `someone/Hello-World`" if permission == "write" else "needs write permission"
        assert reason in repo.comments[0]["body"]
    else:
        assert code == 0 and repo.comments == []


def test_a_pr_that_drops_the_required_approvers_is_still_refused(tmp_path):
    """The default branch requires @ann-gh; the PR deletes `users:` from its config.yaml and a writer
    comments `/deploy`. The gates are the default branch's: refused, and nothing of the PR is read."""
    checkout = tmp_path / "checkout"
    gated = ("gateways:\n  local:\n    connection:\n      type: spark\n"
             "cicd_bot:\n  enable_deploy_command: true\n"
             "users:\n  - username: ann\n    github_username: ann-gh\n    roles: [required_approver]\n")
    git_checkout(checkout, {"config.yaml": gated, "models/orders.sql": "MODEL (name shop.orders, kind FULL);\nSELECT 1 AS a\n"})
    (checkout / "config.yaml").write_text(gated.split("users:")[0])    # the PR's change: no approvers
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "commit", "-qam", "drop the approvers"], check=True)
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    pull = copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"])
    pull["head"]["sha"] = head
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"pulls": [{**pull, "mergeable": True, "mergeable_state": "clean"}],
                                   "permissions": {"writer": "write"}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "comment.md").write_text(previewed_comment(head))   # the PR's sync previewed its head
    code = main(Invocation(event_name="issue_comment", event_path=write_event(tmp_path, pr_comment_event("/deploy", "writer")),
                           output_dir=str(out), answers=str(answers), project_path=str(checkout)), env={})
    assert code == 1
    assert "required approval is missing" in (out / "replies.md").read_text()
    assert not (checkout / ".meshbot").exists()


def test_gate_settings_never_come_from_the_checkout(tmp_path):
    """Without the default branch (no `origin/<default>` ref) or the action's input, the checkout's own
    config.yaml, which enables /deploy and deploys on merge, decides nothing: deploys are refused."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "config.yaml").write_text("cicd_bot:\n  enable_deploy_command: true\n  deploy_on: merge\n")
    push = copy.deepcopy(payload("push/payload.json"))
    push.update(ref="refs/heads/master", after="5" * 40, deleted=False, created=False)
    out = tmp_path / "out"
    lines: list[str] = []

    def no_project(p, g):
        raise AssertionError("the project was opened")

    code = main(Invocation(event_name="push", event_path=write_event(tmp_path, push), output_dir=str(out),
                           project_path=str(checkout)), env={}, context_factory=no_project, out=lines.append)
    assert code == 1
    summary = (out / "summary.md").read_text()
    assert "deploy refused: the deploy gates have no trusted source" in summary and "origin/master" in summary
    # a comment /deploy in the same checkout is not even a command: the deploy command is off by default
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"permissions": {"writer": "write"}}))
    code = main(Invocation(event_name="issue_comment", event_path=write_event(tmp_path, pr_comment_event("/deploy", "writer")),
                           output_dir=str(out), answers=str(answers), project_path=str(checkout)),
                env={}, context_factory=no_project)
    assert code == 0 and "is disabled" in (out / "replies.md").read_text()


def test_a_deploy_checks_out_exactly_the_authorized_head(tmp_path):
    """The deploy job must run on the PR head the API names; any other checkout is refused before loading."""
    checkout = tmp_path / "checkout"
    git_checkout(checkout, {"config.yaml": default_branch_config({"enable_deploy_command": True})})
    engine = FakeEngine()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"writer": "write"},
                              default_config=default_branch_config({"enable_deploy_command": True}))
        moved = copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"])
        moved["head"]["sha"] = "e" * 40          # pushed after the authorize job, or a checkout of another ref
        repo.set_pull(moved, mergeable=True, mergeable_state="clean")
        repo.previewed(moved["head"]["sha"])
        code = main(Invocation(event_name="issue_comment", project_path=str(checkout),
                               event_path=write_event(tmp_path, pr_comment_event("/deploy", "writer"))),
                    env=API_ENV, context_factory=lambda p, g: engine, out=lambda line: None)
        assert not gh.errors, gh.errors
    assert code == 1 and engine.plans == [] and engine.applied == []
    assert "but the head of #2 is eeeeeee" in repo.comments[-1]["body"]


def _release_checkout(tmp_path: Path) -> tuple[Path, str, str]:
    """A checkout whose origin/master has one commit, plus a commit on a side branch (not on master)."""
    checkout = tmp_path / "checkout"
    on_master = git_checkout(checkout, {"config.yaml": "cicd_bot:\n  deploy_on: tag\n"})
    subprocess.run(["git", "-C", str(checkout), "checkout", "-qb", "side"], check=True)
    (checkout / "side.txt").write_text("x")
    subprocess.run(["git", "-C", str(checkout), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example.com",
                    "commit", "-qm", "side"], check=True)
    side = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    return checkout, on_master, side


def test_a_release_deploys_only_a_commit_of_the_default_branch(tmp_path):
    checkout, on_master, side = _release_checkout(tmp_path)
    release = payload("release/published.payload.json")
    engine = FakeEngine()

    def deploy(sha: str) -> tuple[int, str]:
        out = tmp_path / f"out_{sha[:7]}"
        code = main(Invocation(event_name="release", event_path=write_event(tmp_path, release),
                               output_dir=str(out), project_path=str(checkout)),
                    env={"GITHUB_SHA": sha}, context_factory=lambda p, g: engine, out=lambda line: None)
        return code, (out / "summary.md").read_text()

    code, summary = deploy(side)                       # the checkout is the side commit
    assert code == 1 and engine.plans == []
    assert f"the tagged commit {side[:7]} is not on the default branch `master`" in summary
    subprocess.run(["git", "-C", str(checkout), "checkout", "-q", on_master], check=True)
    code, _ = deploy(on_master)
    assert code == 0 and engine.applied == ["prod"]


def test_a_deploy_runs_only_on_the_commit_the_event_names(tmp_path):
    """A release whose tag was moved after the event (GITHUB_SHA is the tagged commit on master, the
    checkout is another commit): refused before the project is read, naming both commits."""
    checkout, on_master, side = _release_checkout(tmp_path)    # checked out: the side commit
    out = tmp_path / "out"

    def no_project(p, g):
        raise AssertionError("the project was opened")

    code = main(Invocation(event_name="release", event_path=write_event(tmp_path, payload("release/published.payload.json")),
                           output_dir=str(out), project_path=str(checkout)),
                env={"GITHUB_SHA": on_master}, context_factory=no_project, out=lambda line: None)
    assert code == 1
    assert (f"the checked-out commit is {side[:7]}, but the tagged commit (GITHUB_SHA) is {on_master[:7]}"
            in shown((out / "summary.md").read_text()))


def test_a_release_through_the_api_is_checked_with_compare(tmp_path):
    engine = FakeEngine()
    workspace = tmp_path / "workspace"
    sha = git_checkout(workspace)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, default_config="cicd_bot:\n  deploy_on: tag\n", released_on_default_branch=False)
        code = main(Invocation(event_name="release", project_path=str(workspace),
                               event_path=write_event(tmp_path, payload("release/published.payload.json"))),
                    env={**API_ENV, "GITHUB_SHA": sha, "GITHUB_WORKSPACE": str(workspace),
                         "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")},
                    context_factory=lambda p, g: engine, out=lambda line: None)
        assert not gh.errors, gh.errors
    assert code == 1 and engine.plans == []
    assert gh.sent("GET", rf"/compare/{'d' * 40}\.\.\.{sha}$") == [None]
    assert "is not on the default branch" in (tmp_path / "s.md").read_text()


class LeakyEngine(FakeEngine):
    """A unit test whose failure message quotes a connection string with its password and token."""

    def test(self, *, patterns=(), files=()):
        from bot.quality.results import TestResult, TestSuiteResult

        return TestSuiteResult(results=(TestResult(
            name="test_orders", file=Path("tests/test_orders.yaml"), model="shop.orders", passed=False,
            message="could not read postgresql://bot:Pg-Secret-42@db/prod via sc://spark:443/;token=SPARK-TOKEN-9"),))


def test_credentials_never_reach_a_comment_check_summary_output_or_log(tmp_path):
    """Whatever text carries them (here a test failure, not a meshbot error), every registered secret
    and every credential of a connection URL is `***` in everything sent to GitHub or printed, in any
    letter case (the ::add-mask:: line of the token is the one place it is named, for GitHub to mask it)."""
    from bot.redact import register_url

    register_url("postgresql://bot:Pg-Secret-42@db/prod")      # as loading the gateway does
    register_url("sc://spark:443/;use_ssl=true;token=SPARK-TOKEN-9")
    outputs, summary = tmp_path / "outputs.env", tmp_path / "summary.md"
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh)
        repo.set_pull(payload("pull_request/opened.payload.json")["pull_request"])
        code = main(Invocation(event_name="pull_request", project_path=str(tmp_path),
                               event_path=write_event(tmp_path, payload("pull_request/opened.payload.json"))),
                    env={**API_ENV, "GITHUB_OUTPUT": str(outputs), "GITHUB_STEP_SUMMARY": str(summary)},
                    context_factory=lambda p, g: LeakyEngine(), out=lines.append)
        assert not gh.errors, gh.errors
    assert code == 1 and repo.check("meshbot - Unit Tests")["conclusion"] == "failure"
    sent = json.dumps([call[2] for call in gh.calls]) + summary.read_text() + outputs.read_text() + "\n".join(
        line for line in lines if not line.startswith("::add-mask::"))
    assert "could not read postgresql://bot:***@db/prod via sc://spark:443/;token=***" in sent
    for secret in ("Pg-Secret-42", "SPARK-TOKEN-9", "ghs_trust_token"):
        assert secret.lower() not in sent.lower()


def test_a_deploy_reads_no_cache_from_disk(tmp_path):
    """.meshbot/cache is data, but its data decides what runs: a planted entry whose digest matches the
    real file could swap the model's SQL. A deploy therefore parses what it deploys (and only writes the
    cache anew); a PR sync may read it, but not for the PR's own files, and not at all when it cannot
    tell which those are."""
    from bot.context import Context
    from bot.github.action import build_run
    from bot.github.runners import dispatch
    from bot.project.example import write_example

    project = tmp_path / "shop"
    write_example(project)
    Context(project).load()                                   # writes .meshbot/cache/models.json
    cache = project / ".meshbot" / "cache" / "models.json"
    data = json.loads(cache.read_text())
    assert "customer_revenue.sql" in cache.read_text()
    planted = cache.read_text().replace("SUM(o.amount)", "SUM(o.amount) * 1000")
    assert planted != cache.read_text()
    cache.write_text(planted)
    assert "* 1000" in Context(project).models["shop.customer_revenue"].query_text   # why deploys must not read it
    fresh = Context(project, read_cache=False).models["shop.customer_revenue"]
    assert "* 1000" not in fresh.query_text and "* 1000" not in cache.read_text()     # rewritten from the files
    assert data["format"] == json.loads(cache.read_text())["format"]

    checkout = tmp_path / "checkout"
    sha = git_checkout(checkout, {"config.yaml": "cicd_bot:\n  deploy_on: merge\n"})
    push = copy.deepcopy(payload("push/payload.json"))
    push.update(ref="refs/heads/master", after=sha, deleted=False, created=False)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"files": {"2": ["models/customer_revenue.sql", "README.md"]}}))
    opened = payload("pull_request/opened.payload.json")
    for name, raw, told, read, fresh in (("push", push, None, False, None),
                                         ("pull_request", opened, None, False, frozenset()),   # files unknown
                                         ("pull_request", opened, str(answers), True,
                                          frozenset({"models/customer_revenue.sql"}))):
        run = build_run(Invocation(event_name=name, event_path=write_event(tmp_path, raw), project_path=str(checkout),
                                   output_dir=str(tmp_path / "out"), answers=told), env={},
                        context_factory=lambda p, g: FakeEngine())
        dispatch(run, "run-all")
        assert (run.seal.read_cache, run.seal.fresh_files) == (read, fresh)


def _approval_check(tmp_path: Path, project: Path) -> tuple[int, dict]:
    event = write_event(tmp_path, payload("pull_request_review/submitted.payload.json"))
    out = tmp_path / f"out_{len(list(tmp_path.iterdir()))}"
    code = main(Invocation(command="check-required-approvers", event_name="pull_request_review",
                           event_path=event, output_dir=str(out), project_path=str(project)), env={},
                out=lambda line: None)
    checks = json.loads((out / "check_runs.json").read_text()) if (out / "check_runs.json").exists() else []
    return code, {c["name"]: c for c in checks}


def test_a_symlinked_project_folder_cannot_move_the_gate_settings(tmp_path):
    """The default branch requires two approvals of proj/; a PR that turns proj/ into a symlink to a folder
    without a config.yaml must not make the Required Approval check pass (it did: `skipped`)."""
    checkout = tmp_path / "checkout"
    git_checkout(checkout, {"proj/config.yaml": "cicd_bot:\n  required_approvers: [alice, bob]\n  min_approvals: 2\n",
                            "docs/README.md": "x\n"})
    code, checks = _approval_check(tmp_path, checkout / "proj")
    assert code == 1 and checks["meshbot - Required Approval"]["conclusion"] == "failure"
    subprocess.run(["git", "-C", str(checkout), "rm", "-rq", "proj"], check=True)
    (checkout / "proj").symlink_to("docs")
    code, checks = _approval_check(tmp_path, checkout / "proj")
    assert code == 1 and checks == {}                     # refused before any check is posted


def test_without_a_trusted_source_the_approval_check_fails_instead_of_skipping(tmp_path):
    checkout = tmp_path / "checkout"
    git_checkout(checkout, {"config.py": "config = None\n"})          # the default branch has no config.yaml
    code, checks = _approval_check(tmp_path, checkout)
    check = checks["meshbot - Required Approval"]
    assert code == 1 and check["conclusion"] == "failure"
    assert "could not be read from a trusted source" in check["summary"]
    assert "has no config.yaml" in check["summary"]


def test_a_deploy_of_a_head_behind_its_base_is_refused(tmp_path):
    """`/deploy` applies the PR's head: a head that lacks commits merged into the base since would take
    them out of prod, so it must contain its base (compare API)."""
    checkout = tmp_path / "checkout"
    head = git_checkout(checkout)
    engine = FakeEngine()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"writer": "write"}, pr_behind_by=3,
                              default_config=default_branch_config({"enable_deploy_command": True}))
        pull = copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"])
        pull["head"]["sha"] = head
        repo.set_pull(pull, mergeable=True, mergeable_state="clean")
        repo.previewed(pull["head"]["sha"])
        code = main(Invocation(event_name="issue_comment", project_path=str(checkout),
                               event_path=write_event(tmp_path, pr_comment_event("/deploy", "writer"))),
                    env=API_ENV, context_factory=lambda p, g: engine, out=lambda line: None)
        assert not gh.errors, gh.errors
    assert code == 1 and engine.plans == []
    assert "#2 is 3 commit(s) behind `master`" in repo.comments[-1]["body"]
    assert gh.sent("GET", rf"/compare/{'d' * 40}\.\.\.{head}$") == [None]


def test_text_a_pull_request_controls_cannot_forge_the_comments_hidden_records():
    """A notice or test message carrying `<!-- meshbot:checks ... -->` (or a plan digest) must not be read
    back as the bot's record: the /deploy gate reads the head the preview was built for from it."""
    from bot.report.comment_state import comment_marker, recorded_checks, recorded_plan_digest
    from bot.github.views import CheckState, CommentView
    from bot.github.comment_fitting import render_comment

    forged = ('<!-- meshbot:checks {"sha": "f0f0f0f", "checks": []} --> '
              '<!-- meshbot:plan-digest feedfacefeedface a.b@1 -->')
    view = CommentView(marker=comment_marker(None), status="", head_sha="a1b2c3d",
                       checks=(CheckState("Unit Tests", "success"),), notices=(forged,))
    body, _ = render_comment(view)
    assert recorded_checks(body)[0] == "a1b2c3d"
    assert recorded_plan_digest(body) is None
    assert "&lt;!-- meshbot:checks" in body


def test_a_templated_gate_setting_on_the_default_branch_is_an_error_not_a_placeholder(tmp_path):
    checkout = tmp_path / "checkout"
    git_checkout(checkout, {"config.yaml": "cicd_bot:\n  required_approvers: [\"{{ env_var('APPROVER') }}\"]\n"})
    lines: list[str] = []
    code = main(Invocation(command="check-required-approvers", event_name="pull_request_review",
                           event_path=write_event(tmp_path, payload("pull_request_review/submitted.payload.json")),
                           output_dir=str(tmp_path / "out"), project_path=str(checkout)), env={}, out=lines.append)
    assert code == 1 and not (tmp_path / "out" / "check_runs.json").exists()
    assert "config.yaml on the default branch `master`: `cicd_bot` uses a template" in lines[-1]




class _StateOnlyRunner:
    """Spark stand-in for recording a --skip-backfill prod deploy in the state: it creates nothing."""

    def ensure_schemas(self, schemas) -> None: ...
    def create_physical(self, snapshot, model, *, table, table_mapping) -> None: ...
    def replace_views(self, views) -> None: ...
    def drop_views(self, views) -> None: ...


CACHE_FILES = ("models.json", "rendered.json", "hashes.json")


def _cache_entries(cache: Path) -> dict[str, dict]:
    """Each cache file's entries, its changes file merged in."""
    found = {}
    for name in CACHE_FILES:
        entries = json.loads((cache / name).read_text())["entries"]
        changes = cache / name.replace(".json", ".changes.json")
        if changes.exists():
            entries.update(json.loads(changes.read_text())["entries"])
        found[name] = entries
    return found


def test_a_planted_cache_entry_for_the_prs_files_changes_nothing_the_comment_says(tmp_path):
    """The PR doubles shop.customer_revenue. Its own cache scope (which its code can write) holds entries
    under the keys of its new files, whose values are the old model's: parse, render and hashes. The
    prod plan preview still names the change, from the files."""
    from bot.context import Context
    from bot.plan.definition import PlanOptions
    from bot.plan.evaluator import PlanEvaluator
    from bot.project.example import write_example

    project = tmp_path / "shop"
    write_example(project)
    prod = Context(project)
    models = prod.models
    PlanEvaluator(state=prod.state, runner=_StateOnlyRunner(), models_for=lambda s: models[s.name]).apply(
        prod.plan("prod", options=PlanOptions(skip_backfill=True)))
    prod.close()
    cache = project / ".meshbot" / "cache"
    before = _cache_entries(cache)

    model = project / "models" / "customer_revenue.sql"
    model.write_text(model.read_text().replace("SUM(o.amount) AS revenue", "SUM(o.amount) * 2 AS revenue"))
    honest = Context(project, read_cache=False)   # writes the keys of the PR's files, as anyone can compute them
    changes = [c.name for c in honest.plan("prod").changes]
    honest.close()
    assert changes[0] == "shop.customer_revenue"
    planted = {name: {key: [entry[0], *before[name][key][1:]] if key in before[name] else entry
                      for key, entry in entries.items()} for name, entries in _cache_entries(cache).items()}
    for name, entries in planted.items():
        (cache / name.replace(".json", ".changes.json")).unlink(missing_ok=True)
        header = {k: v for k, v in json.loads((cache / name).read_text()).items() if k != "entries"}
        (cache / name).write_text(json.dumps({**header, "entries": entries}))
    trusting = Context(project)
    assert trusting.plan("prod").changes == ()   # what the planted entries make of a reader that trusts them
    trusting.close()

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, files=["models/customer_revenue.sql"])
        code = main(Invocation(command="gen-prod-plan", event_name="pull_request", project_path=str(project),
                               config="allow_ephemeral_state: true",
                               event_path=write_event(tmp_path, payload("pull_request/opened.payload.json"))),
                    env=API_ENV, out=lambda line: None)
        assert not gh.errors, gh.errors
    assert code == 0
    body = repo.comments[0]["body"]
    assert "Nothing to change" not in body and "shop.customer_revenue" in body and "* 2" in body
    assert repo.check("meshbot - Prod Plan Preview")["output"]["title"].startswith(f"Prod plan: {len(changes)} change(s)")
    # and the run put the PR's own entry back from its file
    assert _cache_entries(cache)["models.json"]["models/customer_revenue.sql"][1] != \
        before["models.json"]["models/customer_revenue.sql"][1]
