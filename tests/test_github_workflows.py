"""action.yml and the workflows validate against the SchemaStore schemas; triggers, permissions, Environments,
checkouts, pins, cache rules and concurrency hold (security issue 23), and zizmor finds nothing in them.

About no one module of bot/github: the files GitHub runs (action.yml, .github/workflows) around `meshbot github`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

import bot
from github_support import GITHUB_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
USER_WORKFLOWS = ("meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml", "meshbot-deploy-command.yml",
                  "meshbot-run.yml")
SHA_PIN = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
TRUSTED_ASSOCIATIONS = ("OWNER", "MEMBER", "COLLABORATOR")


def _schema(name: str) -> dict:
    return json.loads((GITHUB_FIXTURES / "schemas" / name).read_text())


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    if True in data:   # YAML 1.1 reads the `on:` key as a boolean; GitHub reads it as "on"
        data["on"] = data.pop(True)
    return data


def _workflow(name: str) -> dict:
    return _load(ROOT / ".github/workflows" / name)


def _environment(job: dict) -> str | None:
    env = job.get("environment")
    return env.get("name") if isinstance(env, dict) else env


def _all_jobs():
    for path in WORKFLOWS:
        for job_id, job in _load(path)["jobs"].items():
            yield path.name, job_id, job


def _uses_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if re.match(r"\s*(- )?uses:", line)]


def test_action_yml_is_valid_and_declares_the_issue_interface():
    action = _load(ROOT / "action.yml")
    jsonschema.validate(action, _schema("github-action.json"))
    assert action["runs"]["using"] == "composite"
    assert {"project_path", "gateway", "command", "github_token", "python_version", "extra_pip",
            "config"} <= set(action["inputs"])
    assert {"pr_environment_name", "created_pr_environment", "plan_id", "unit_tests", "required_approval",
            "prod_environment_synced"} <= set(action["outputs"])
    assert action["inputs"]["command"]["default"] == "run-all"
    assert "authorize-deploy" in action["inputs"]["command"]["description"]
    for name in ("authorized", "sha", "pr_number"):
        assert action["outputs"][name]["value"] == "${{ steps.bot.outputs.%s }}" % name


# meshbot's own release (publish.yml): the only writes to contents and packages, each in the one job that
# needs it, both in the `release` Environment; its tests are in tests/test_release.py
PUBLISH_GRANTS = {"check": {"contents": "read"},
                  "image": {"contents": "read", "packages": "write"},   # pushes to ghcr.io
                  "release": {"contents": "write"}}                      # the release and the vX tag


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_are_valid_with_least_permissions(path):
    """No permission at the top; each job asks for what it uses, never contents/actions/packages write
    (but in publish.yml, exactly the grants reviewed in PUBLISH_GRANTS)."""
    workflow = _load(path)
    jsonschema.validate(workflow, _schema("github-workflow.json"))
    assert workflow["permissions"] == {}, "permissions: {} at the top, job-level grants only"
    if path.name == "publish.yml":
        assert {job_id: job["permissions"] for job_id, job in workflow["jobs"].items()} == PUBLISH_GRANTS
        assert all(job.get("name") for job in workflow["jobs"].values())
        assert {job_id for job_id, job in workflow["jobs"].items() if _environment(job) == "release"} == \
            {job_id for job_id, grants in PUBLISH_GRANTS.items() if "write" in grants.values()}
        return
    for job_id, job in workflow["jobs"].items():
        permissions = job["permissions"]
        assert isinstance(permissions, dict) and permissions.get("contents") == "read", (job_id, permissions)
        assert not any(v == "write" for k, v in permissions.items()
                       if k in ("contents", "actions", "packages", "id-token")), (job_id, permissions)
        assert job.get("name"), f"{path.name}: job {job_id} has no name"


def test_only_the_deploy_command_workflow_runs_on_comments():
    for path in WORKFLOWS:
        triggers = set(_load(path)["on"])
        assert not triggers & {"pull_request_target", "workflow_run"}, path.name
        if path.name != "meshbot-deploy-command.yml":
            assert "issue_comment" not in triggers, path.name
    pr = _workflow("meshbot-pr.yml")
    assert pr["on"] == {
        "pull_request": {"types": ["opened", "synchronize", "reopened", "ready_for_review", "closed"]},
        "pull_request_review": {"types": ["submitted", "dismissed"]},
        "merge_group": {"types": ["checks_requested"]},   # the merge queue's commit gets the required checks
    }
    assert _workflow("meshbot-deploy-command.yml")["on"] == {"issue_comment": {"types": ["created"]}}
    assert set(_workflow("meshbot-release.yml")["on"]) == {"release"}, \
        "a release published from a new tag must deploy once, not twice"
    deploy = _workflow("meshbot-deploy.yml")["on"]
    assert set(deploy) == {"push", "workflow_dispatch"}     # dispatched: a rollback (or a run)
    assert set(deploy["workflow_dispatch"]["inputs"]) == {"rollback", "rollback_to", "allow_drift"}


def test_deploy_command_authorizes_without_secrets_then_deploys_the_verified_head():
    workflow = _workflow("meshbot-deploy-command.yml")
    authorize, deploy = workflow["jobs"]["authorize"], workflow["jobs"]["deploy"]

    # job 1: sees the untrusted comment, so no secrets, no checkout, no Environment, a read-mostly token
    assert "secrets." not in json.dumps(authorize)
    assert not any("actions/checkout@" in s.get("uses", "") for s in authorize["steps"])
    assert "environment" not in authorize
    condition = authorize["if"]
    assert "github.event.issue.pull_request" in condition
    assert "startsWith(github.event.comment.body, '/deploy')" in condition
    assert "github.event.comment.author_association" in condition
    assert all(f'"{association}"' in condition for association in TRUSTED_ASSOCIATIONS)
    assert authorize["permissions"] == {"contents": "read", "pull-requests": "read", "issues": "write"}
    [step] = authorize["steps"]
    assert step["uses"].startswith("meshbot/meshbot@") and step["with"]["command"] == "authorize-deploy"
    for name in ("authorized", "sha", "pr_number"):
        assert authorize["outputs"][name] == "${{ steps.%s.outputs.%s }}" % (step["id"], name)

    # job 2: only on the bot's verdict, in `production`, on exactly the authorized commit
    assert deploy["needs"] in ("authorize", ["authorize"])
    assert "needs.authorize.outputs.authorized == 'true'" in deploy["if"]
    assert _environment(deploy) == "production"
    checkout = next(s for s in deploy["steps"] if "actions/checkout@" in s.get("uses", ""))
    assert checkout["with"]["ref"] == "${{ needs.authorize.outputs.sha }}"
    bot = next(s for s in deploy["steps"] if "meshbot/meshbot@" in s.get("uses", ""))
    assert bot["with"]["command"] == "run-all"
    assert deploy["permissions"]["contents"] == "read", "contents: write only when merge_method merges"
    assert "concurrency" not in deploy and "concurrency" not in authorize
    assert workflow["concurrency"]["group"] == "meshbot-command-${{ github.event.comment.id }}", \
        "one group per comment: no command waits behind (or is cancelled by) another comment's run"


def test_every_checkout_drops_its_credentials():
    checkouts = 0
    for name, job_id, job in _all_jobs():
        for step in job.get("steps", []):
            if "actions/checkout@" in step.get("uses", ""):
                checkouts += 1
                assert step.get("with", {}).get("persist-credentials") is False, (name, job_id)
    assert checkouts >= 5


def test_every_job_with_secrets_runs_in_an_environment():
    expected = {"meshbot-pr.yml": "meshbot-pr", "meshbot-deploy.yml": "production",
                "meshbot-release.yml": "production", "meshbot-deploy-command.yml": "production",
                "meshbot-run.yml": "production"}
    with_secrets = 0
    for name, job_id, job in _all_jobs():
        if "secrets." in json.dumps(job):
            with_secrets += 1
            assert _environment(job), f"{name}: job {job_id} reads secrets outside an Environment"
            assert _environment(job) == expected[name], (name, job_id, _environment(job))
    assert with_secrets == 5


@pytest.mark.parametrize("path", [ROOT / "action.yml", *WORKFLOWS], ids=lambda p: p.name)
def test_every_uses_is_pinned_to_a_commit_with_its_version(path):
    lines = _uses_lines(path)
    assert lines, path.name
    for line in lines:
        reference, _, comment = line.split("uses:", 1)[1].partition("#")
        reference = reference.strip()
        if reference.startswith("./"):
            continue
        assert SHA_PIN.match(reference), f"{path.name}: {line}"
        assert re.match(r"\s*v\d+(\.\d+)*\b", comment), f"{path.name}: no version comment: {line}"


def test_pins_of_one_action_agree_everywhere():
    """actions/cache/restore and actions/cache/save are one repository: one commit for both."""
    pins: dict[str, set[str]] = {}
    for path in (ROOT / "action.yml", *WORKFLOWS):
        for line in _uses_lines(path):
            reference, _, comment = line.split("uses:", 1)[1].partition("#")
            action, _, sha = reference.strip().partition("@")
            repo = "/".join(action.split("/")[:2])
            pins.setdefault(repo, set()).add(f"{sha} {comment.split()[0] if comment.split() else ''}")
    assert all(len(versions) == 1 for versions in pins.values()), pins


def test_dependabot_updates_the_pins_and_the_python_dependencies():
    config = yaml.safe_load((ROOT / ".github/dependabot.yml").read_text())
    assert config["version"] == 2
    ecosystems = {(u["package-ecosystem"], u["directory"]): u["schedule"]["interval"] for u in config["updates"]}
    assert ecosystems == {("github-actions", "/"): "weekly", ("pip", "/"): "weekly"}
    # the lock (requirements/*.txt) is read from directory "/"; sqlglot[c] needs sqlglotc of its own version
    [pip] = [u for u in config["updates"] if u["package-ecosystem"] == "pip"]
    assert pip["groups"]["sqlglot"]["patterns"] == ["sqlglot", "sqlglotc"]
    assert (ROOT / "requirements" / "test.txt").is_file()


def test_user_workflows_run_in_their_environments():
    names = {p.name for p in WORKFLOWS}
    assert {"ci.yml", *USER_WORKFLOWS} <= names
    assert _environment(_workflow("meshbot-pr.yml")["jobs"]["meshbot"]) == "meshbot-pr"
    release = _workflow("meshbot-release.yml")["jobs"]["promote"]
    assert _environment(release) == "production"
    assert _environment(_workflow("meshbot-deploy.yml")["jobs"]["deploy"]) == "production"
    checkout = next(s for s in release["steps"] if "actions/checkout@" in s.get("uses", ""))
    # the commit the release named (a tag can be moved after the event; the bot also checks HEAD == GITHUB_SHA)
    assert checkout["with"]["ref"] == "${{ github.sha }}"
    run = _workflow("meshbot-run.yml")
    assert set(run["on"]) == {"schedule", "workflow_dispatch"} and _environment(run["jobs"]["run"]) == "production"
    assert next(s for s in run["jobs"]["run"]["steps"] if "meshbot/meshbot@" in s.get("uses", ""))["with"]["command"] == "run"
    assert "bash .ci/run" in (ROOT / ".github/workflows/ci.yml").read_text()


# Two runs of one event kind, as GitHub would start them (distinct run ids and comment ids, the same PR)
_CONTEXTS = {
    "push": {"event_name": "push", "ref": "refs/heads/main"},
    "release": {"event_name": "release", "ref": "refs/tags/v1.2.0"},
    "schedule": {"event_name": "schedule", "ref": "refs/heads/main"},
    "workflow_dispatch": {"event_name": "workflow_dispatch", "ref": "refs/heads/main"},
    "pull_request": {"event_name": "pull_request", "ref": "refs/pull/7/merge",
                     "event": {"pull_request": {"number": 7}}},
    "pull_request_review": {"event_name": "pull_request_review", "ref": "refs/pull/7/merge",
                            "event": {"pull_request": {"number": 7}}},
    "issue_comment": {"event_name": "issue_comment", "ref": "refs/heads/main",
                      "event": {"issue": {"number": 7}}},
    "merge_group": {"event_name": "merge_group", "ref": "refs/heads/gh-readonly-queue/main/pr-7-" + "a" * 40,
                    "event": {"merge_group": {"head_sha": "b" * 40}}},
}
# Where GitHub may cancel a pending run because a newer one queued and nothing is lost: the newer run does
# the same work on newer input (the newer push of the branch, the next run of what is due, the PR's newer head)
_SUPERSEDING = ({("meshbot-deploy.yml", "push")},
                {("meshbot-run.yml", "schedule"), ("meshbot-run.yml", "workflow_dispatch")},
                {("meshbot-pr.yml", "pull_request"), ("meshbot-pr.yml", "pull_request_review")},
                {("meshbot-pr.yml", "merge_group")})   # a re-run of the same queue commit


def _expression(text: str, context: dict) -> str:
    """A `${{ }}` concurrency group as GitHub evaluates it, for the operators the workflows use (== && || !,
    github.* lookups; a missing property is '')."""
    def lookup(match: re.Match) -> str:
        value: object = context
        for part in match.group(0).split(".")[1:]:
            value = value.get(part, "") if isinstance(value, dict) else ""
        return repr(str(value))

    def evaluate(match: re.Match) -> str:
        source = re.sub(r"\bgithub(\.[A-Za-z_][\w-]*)+", lookup, match.group(1))
        source = source.replace("&&", " and ").replace("||", " or ")
        source = re.sub(r"!(?!=)", " not ", source)
        return str(eval(source, {"__builtins__": {}}))   # noqa: S307 - our own workflow files
    return re.sub(r"\$\{\{(.*?)\}\}", evaluate, text)


def test_the_group_expression_evaluator():
    context = {"event_name": "push", "ref": "refs/heads/main", "run_id": "11"}
    assert _expression("d-${{ github.event_name == 'push' && github.ref || github.run_id }}", context) == \
        "d-refs/heads/main"
    assert _expression("d-${{ github.event_name == 'push' && github.ref || github.run_id }}",
                       {**context, "event_name": "release"}) == "d-11"
    assert _expression("pr-${{ github.event.pull_request.number }}", context) == "pr-"


def _concurrency_groups() -> dict[str, list[tuple[str, str, str]]]:
    """group -> the (workflow, event, run id) of every run or job that would queue in it, two runs per
    event kind a workflow is triggered by."""
    groups: dict[str, list[tuple[str, str, str]]] = {}
    run_id = 100
    for name in USER_WORKFLOWS:
        workflow = _workflow(name)
        for event in workflow["on"]:
            for _ in range(2):
                run_id += 1
                # each run is its own comment and release (one fires per event)
                context = {**_CONTEXTS[event], "run_id": str(run_id),
                           "event": {**_CONTEXTS[event].get("event", {}), "comment": {"id": run_id},
                                     "release": {"id": run_id}}}
                levels = [workflow.get("concurrency")] + [job.get("concurrency") for job in workflow["jobs"].values()]
                for concurrency in filter(None, levels):
                    group = concurrency if isinstance(concurrency, str) else concurrency["group"]
                    assert isinstance(concurrency, str) or concurrency.get("cancel-in-progress") in (None, False), \
                        f"{name}: a run in progress is never cancelled"
                    groups.setdefault(_expression(group, context), []).append((name, event, str(run_id)))
    return groups


def test_no_one_shot_event_can_be_cancelled_through_a_concurrency_group():
    """GitHub keeps one running and one pending run per concurrency group and cancels the pending one when
    another queues. A release, `/deploy`, `/rollback` or dispatched rollback fires once: none may share a
    group with another run; only runs that supersede each other (pushes of one branch, scheduled runs, one
    PR's events) may."""
    groups = _concurrency_groups()
    assert groups, "the shipped workflows declare their concurrency"
    for group, members in groups.items():
        runs = {(name, event) for name, event, _ in members}
        if len({run_id for *_, run_id in members}) < 2:
            continue
        assert any(runs <= family for family in _SUPERSEDING), \
            f"group {group!r} would let GitHub cancel a pending run of {sorted(runs)}"
    deploy_pushes = [g for g, members in groups.items() if ("meshbot-deploy.yml", "push") in
                     {(n, e) for n, e, _ in members}]
    assert deploy_pushes == ["meshbot-deploy-refs/heads/main"], "pushes of the default branch deploy one at a time"


def test_no_expression_is_expanded_inside_a_shell_script():
    """${{ }} in `run:` is pasted into the script before bash parses it (template injection): values go
    through `env:` instead."""
    for path in (ROOT / "action.yml", *WORKFLOWS):
        data = _load(path)
        steps = data["runs"]["steps"] if path.name == "action.yml" else \
            [s for job in data["jobs"].values() for s in job.get("steps", [])]
        for step in steps:
            assert "${{" not in step.get("run", ""), (path.name, step.get("name"))


def _secrets_of(workflow: dict) -> set[str]:
    text = json.dumps(workflow)
    return {name for name in re.findall(r"secrets\.([A-Z_]+)", text) if name != "GITHUB_TOKEN"}


def test_shipped_workflows_use_the_team_gateway_with_every_secret_it_reads():
    """The workflows run the example's `ci` gateway as shipped: every env_var it reads is set from a
    secret or variable, and README (with docs/action.md) and workflows name the same action and secrets."""
    config = (ROOT / "bot/project/example/config.yaml").read_text()
    ci_block = config[config.index("  ci:"):config.index("default_gateway")]
    needed = set(re.findall(r"env_var\('([A-Z_]+)'", ci_block))
    assert {"MESHBOT_SPARK_REMOTE", "MESHBOT_STATE_PASSWORD"} <= needed
    # the README's minimal workflow and docs/action.md's steps
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "action.md").read_text()
    references = set(re.findall(r"uses: (\S+/meshbot@\S+)", readme))
    used = set()
    for name in USER_WORKFLOWS:
        workflow = _workflow(name)
        for job in workflow["jobs"].values():
            step = next(s for s in job["steps"] if "meshbot@" in s.get("uses", ""))
            used.add(step["uses"])
            if step["with"]["command"] == "authorize-deploy":
                continue
            assert needed <= set(job["env"]), (name, needed - set(job["env"]))
            assert step["with"]["gateway"] == "ci", name
        assert _secrets_of(workflow) <= set(re.findall(r"`(MESHBOT_[A-Z_]+)`", readme)), name
    assert len(used) == 1, used
    # the README shows the action as `<owner>/meshbot` (at the moving major tag) and names the shipped
    # workflows' placeholder to replace; once it shows a pinned commit, the shipped one
    [shipped] = used
    assert {r.split("@")[0] for r in references} == {"<owner>/meshbot"}, references
    assert shipped.split("@")[0].endswith("/meshbot") and f"`{shipped}`" in readme, shipped
    assert {r.split("@")[1] for r in references} == {"v1"}, references
    assert all(r in used for r in references if SHA_PIN.match(r)), (references, used)


def test_action_cache_key_changes_with_meshbot_python_and_project_files():
    """A key of the project's files alone would hit a cache written by an older meshbot forever."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    key_step = next(s for s in steps if s.get("id") == "cache-key")
    restore = next(s for s in steps if s.get("id") == "cache-restore")
    assert steps.index(key_step) < steps.index(restore)
    assert restore["with"]["path"] == "${{ steps.folders.outputs.caches }}"
    assert restore["with"]["key"] == "${{ steps.cache-key.outputs.prefix }}${{ steps.cache-key.outputs.files }}"
    assert "PYTHON_VERSION" in key_step["run"] and "GITHUB_ACTION_PATH" in key_step["run"]
    assert "python_version" in key_step["env"]["PYTHON_VERSION"]


def _step_outputs(step: dict, workspace: Path, env: dict[str, str]) -> dict[str, str]:
    """Run a `run:` step of action.yml as the runner does and read what it wrote to $GITHUB_OUTPUT
    (`name=value` lines and `name<<DELIMITER` blocks)."""
    output = workspace.parent / f"output-{step['id']}"
    output.write_text("")
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace,
                            env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_ACTION_PATH": str(ROOT),
                                 "GITHUB_OUTPUT": str(output), "RUNNER_OS": "Linux", **env},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    values, lines = {}, iter(output.read_text().splitlines())
    for line in lines:
        if "<<" in line and "=" not in line.split("<<")[0]:
            name, delimiter = line.split("<<", 1)
            values[name] = "\n".join(iter(lines.__next__, delimiter))
        else:
            name, _, value = line.partition("=")
            values[name] = value
    return values


def test_project_path_takes_one_folder_per_line_and_the_cache_key_covers_every_folder(tmp_path):
    """A multi-repo project: project_path names its folders one per line; the first one picks the PySpark
    extra, meshbot gets --project-path once per folder, each folder's .meshbot/cache is restored and saved,
    and the key changes with a project file of any folder but not with what meshbot writes under .meshbot/."""
    steps = {s.get("id"): s for s in _load(ROOT / "action.yml")["runs"]["steps"]}
    workspace = tmp_path / "ws"
    for folder in ("repo_1", "repo 2"):
        (workspace / folder / "models").mkdir(parents=True)
        (workspace / folder / "models" / "a.sql").write_text("SELECT 1\n")
    folders = _step_outputs(steps["folders"], workspace, {"MESHBOT_PROJECT_PATH": "  repo_1\n\nrepo 2  \n"})
    assert folders == {"first": "repo_1", "list": "repo_1\nrepo 2",
                       "caches": "repo_1/.meshbot/cache\nrepo 2/.meshbot/cache"}
    assert _step_outputs(steps["folders"], workspace, {"MESHBOT_PROJECT_PATH": ""})["list"] == "."
    assert steps["install"]["env"]["MESHBOT_PROJECT_PATH"] == "${{ steps.folders.outputs.first }}"

    def key() -> str:
        return _step_outputs(steps["cache-key"], workspace, {"MESHBOT_PROJECT_PATH": folders["list"],
                                                             "PYTHON_VERSION": "3.11"})["files"]

    first = key()
    (workspace / "repo 2" / ".meshbot" / "cache").mkdir(parents=True)
    (workspace / "repo 2" / ".meshbot" / "cache" / "models.json").write_text("{}")
    assert key() == first
    (workspace / "repo 2" / "models" / "a.sql").write_text("SELECT 2\n")
    assert key() != first
    run = steps["bot"]["run"].replace('"$MESHBOT_VENV/bin/meshbot" github', 'printf "%s|" github')
    shown = _step_outputs({"id": "bot", "run": run.rstrip() + ' > "$GITHUB_OUTPUT"'}, workspace,
                          {"MESHBOT_PROJECT_PATH": folders["list"], "MESHBOT_COMMAND": "run-all"})
    assert shown == {"github|--project-path|repo_1|--project-path|repo 2|run-all|": ""}


def test_action_cache_is_saved_by_trusted_events_only_and_restored_by_prefix_on_pull_requests_only():
    """A cache saved from an issue_comment (or any default-branch-scoped event) would be read by every
    deploy, one saved from a pull request by that pull request's next run; a prefix restore in a deploy
    would read the newest entry whoever wrote it."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    assert not any(re.match(r"actions/cache@", str(s.get("uses", ""))) for s in steps), \
        "actions/cache saves from every event in its post step"
    restore = next(s for s in steps if s.get("id") == "cache-restore")
    save = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@")
                and s["with"]["path"] == restore["with"]["path"])
    bot = next(s for s in steps if s.get("id") == "bot")
    check = steps[steps.index(save) - 1]
    assert restore["uses"].startswith("actions/cache/restore@")
    assert restore["with"]["restore-keys"] == \
        "${{ github.event_name == 'pull_request' && steps.cache-key.outputs.prefix || '' }}"
    assert steps.index(restore) < steps.index(bot) < steps.index(check) < steps.index(save) == len(steps) - 1
    condition = " ".join(check["if"].split())
    assert condition.endswith("&& github.event_name == 'push' && github.ref == "
                              "format('refs/heads/{0}', github.event.repository.default_branch)")
    assert condition.startswith("success() &&") and "always()" not in condition and "||" not in condition
    assert save["if"] == "success() && steps.%s.outcome == 'success'" % check["id"]
    assert save["with"]["path"] == restore["with"]["path"]
    assert save["with"]["key"] == "${{ steps.%s.outputs.cache-primary-key }}" % restore["id"]
    for step in (steps[steps.index(restore) - 1], restore, check):
        assert "inputs.command != 'authorize-deploy'" in step["if"], step.get("name")
    drop = steps[steps.index(restore) - 1]
    assert drop["run"].endswith('rm -rf -- "$folder/.meshbot/cache"; done\n'), "a committed cache goes first"


def test_a_pull_request_restores_only_what_the_default_branch_saved_and_saves_nothing():
    """A pull request's own cache scope is written by that pull request's code (its Python models run in
    the job): an entry saved there for its next commit's files could make the next comment say "nothing
    to change". So no parse cache, nor installed environment, is saved from any event but the default
    branch's own, and a pull request's prefix restore finds only what those saved."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    ids = [s.get("id") for s in steps]
    saves = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@")]
    assert len(saves) == 2 and not any(re.match(r"actions/cache@", str(s.get("uses", ""))) for s in steps)
    cache_save = next(s for s in saves if s["with"]["path"] == "${{ steps.folders.outputs.caches }}")
    deciding = " ".join(steps[ids.index("cache-check")]["if"].split())
    assert cache_save["if"] == "success() && steps.cache-check.outcome == 'success'"
    assert re.findall(r"github\.event_name == '(\w+)'", deciding) == ["push"]
    assert "pull_request" not in deciding and "!=" not in deciding.split("cache-hit != 'true'")[1]
    assert "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)" in deciding
    venv_save = next(s for s in saves if s is not cache_save)
    assert venv_save["if"].startswith("success() && steps.install.outputs.save == 'true'")   # default branch only
    restores = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache/restore@")]
    assert {s["id"] for s in restores} == {"venv-restore", "cache-restore"}
    for restore in restores:   # one key prefix for every event: what a pull request finds, a push saved
        assert restore["with"].get("restore-keys", "") in (
            "", "${{ github.event_name == 'pull_request' && steps.cache-key.outputs.prefix || '' }}")


def _cache_step(name: str) -> dict:
    return next(s for s in _load(ROOT / "action.yml")["runs"]["steps"] if s.get("name") == name)


def _run_step(step: dict, workspace: Path, project_path: str) -> subprocess.CompletedProcess:
    """A `run:` step of action.yml, run by bash as the runner runs `shell: bash`, in `workspace`."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_ACTION_PATH": str(ROOT),
           "GITHUB_WORKSPACE": str(workspace), "MESHBOT_PROJECT_PATH": project_path}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=60)


DROP_STEP, SAVE_CHECK_STEP = "Drop a committed meshbot cache", "Check meshbot's cache folder before saving it"


@pytest.mark.parametrize("step_name", [DROP_STEP, SAVE_CHECK_STEP])
@pytest.mark.parametrize("project_path, link, target", [
    ("shop", "shop/.meshbot", "outside"),                                      # .meshbot -> a folder outside
    ("shop", "shop/.meshbot/cache", "outside/cache"),                          # .meshbot/cache -> one outside
    ("shop/", "shop", "outside"),                                              # the project folder itself
    ("./shop", "shop/.meshbot/cache/models.json", "outside/cache/keep.txt"),  # a file in the cache
])
def test_the_cache_steps_refuse_a_symlink_and_delete_nothing_outside_the_workspace(tmp_path, step_name,
                                                                                   project_path, link, target):
    """A `.meshbot` committed as a symlink to a folder outside the workspace: `rm -rf .meshbot/cache`
    would empty that folder's cache/, and a restore or save would write or read through the link."""
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    for folder in (outside / "cache", outside / ".meshbot" / "cache"):
        folder.mkdir(parents=True)
        (folder / "keep.txt").write_text("not meshbot's\n")
    (workspace / link).parent.mkdir(parents=True)
    (workspace / link).symlink_to(tmp_path / target)
    result = _run_step(_cache_step(step_name), workspace, project_path)
    assert result.returncode == 1, result
    [line] = result.stdout.splitlines()
    assert line.startswith(f"::error title=meshbot::`{link}` is a symlink (to `{tmp_path / target}`)"), line
    assert "nothing was changed" in line
    for folder in (outside / "cache", outside / ".meshbot" / "cache"):
        assert (folder / "keep.txt").read_text() == "not meshbot's\n"


def test_the_drop_step_removes_a_committed_cache_and_nothing_else(tmp_path):
    workspace = tmp_path / "workspace"
    cache = workspace / "shop" / ".meshbot" / "cache"
    cache.mkdir(parents=True)
    (cache / "models.json").write_text("{}")
    (cache.parent / "state.db").write_text("")
    for project_path in ("shop", str(workspace / "shop")):
        result = _run_step(_cache_step(DROP_STEP), workspace, project_path)
        assert result.returncode == 0 and result.stdout == "", result
        assert not cache.exists() and (cache.parent / "state.db").exists()
    assert _run_step(_cache_step(SAVE_CHECK_STEP), workspace, "shop").returncode == 0


def test_action_restores_the_installed_environment_by_exact_key_and_saves_it_from_the_default_branch_only():
    """The virtualenv with meshbot and its PySpark extra, installed from the lock: keyed on everything that
    makes it (meshbot's version, pyproject and lock file, the action's path, the extra, Python, runner OS and
    image), restored by exact key on every event but authorize-deploy, saved right after a fresh install
    (before extra_pip and before meshbot runs anything of the project) and only by the default branch's
    own events."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    ids = [s.get("id") for s in steps]
    choose, restore = steps[ids.index("install")], steps[ids.index("venv-restore")]
    uv = next(s for s in steps if s.get("name") == "Install uv")
    install = next(s for s in steps if s.get("name") == "Install meshbot from the action's checkout")
    save = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@")
                and s["with"]["path"] == restore["with"]["path"])
    extra_pip = next(s for s in steps if s.get("name") == "Install extra_pip")
    bot = steps[ids.index("bot")]
    assert steps.index(choose) < steps.index(restore) < steps.index(uv) < steps.index(install) \
        < steps.index(save) < steps.index(extra_pip) < steps.index(bot)
    assert steps.index(save) < ids.index("cache-restore")   # before the project's parse cache is even read
    assert "restore-keys" not in restore["with"]
    assert restore["with"]["key"] == "${{ steps.install.outputs.key }}"
    assert restore["with"]["path"] == "${{ steps.install.outputs.venv }}"
    assert save["with"]["key"] == "${{ steps.venv-restore.outputs.cache-primary-key }}"
    for part in ("RUNNER_OS", "ImageOS", "PYTHON_FULL_VERSION", "version", "extra", "deps"):
        assert "${" + part in choose["run"].split("key=", 1)[1], part
    assert choose["env"]["PYTHON_FULL_VERSION"] == "${{ steps.python.outputs.python-version }}"
    assert 'python -I "$GITHUB_ACTION_PATH/bot/spark/pip_extra.py"' in choose["run"]
    assert "inputs.command != 'authorize-deploy'" in restore["if"]
    assert install["if"] == "steps.venv-restore.outputs.cache-hit != 'true'"
    # the locked versions, each file checked against its hash, then meshbot's own code resolving nothing
    locked, meshbot = [line for line in install["run"].splitlines() if " pip install " in line]
    assert locked.endswith('--require-hashes -r "$MESHBOT_LOCK"')
    assert meshbot.endswith('--no-deps -e "$GITHUB_ACTION_PATH"')
    assert install["env"]["MESHBOT_LOCK"] == "${{ steps.install.outputs.lock }}"
    # who may save: one expression, in the choose step; the save step and the bytecode follow its output
    condition = " ".join(save["if"].split())
    assert condition == ("success() && steps.install.outputs.save == 'true' "
                         "&& steps.venv-restore.outputs.cache-hit != 'true'")
    assert install["env"]["MESHBOT_BYTECODE"] == "${{ steps.install.outputs.save }}"
    who = " ".join(choose["env"]["MESHBOT_SAVE_VENV"].split())
    assert who.startswith("${{ github.ref == format('refs/heads/{0}', github.event.repository.default_branch) && (")
    assert set(re.findall(r"github\.event_name == '(\w+)'", who)) == {"push", "schedule", "workflow_dispatch"}
    assert "||" not in who.split("&& (", 1)[0]
    # uv reads no configuration of the checkout (an index of a PR's choosing) and runs away from it
    for step in (install, extra_pip):
        assert step["env"]["UV_NO_CONFIG"] == "1", step["name"]
        assert step["run"].startswith('cd "$RUNNER_TEMP"\n'), step["name"]
        assert all("--no-cache" in line for line in step["run"].splitlines() if " pip install " in line)
    assert uv["run"].count("cd \"$RUNNER_TEMP\"") == 1 and re.search(r'"uv==\d+\.\d+\.\d+"', uv["run"])
    assert '"$MESHBOT_VENV/bin/meshbot" github' in bot["run"]


def test_the_action_picks_the_pyspark_extra_from_the_config_as_data(tmp_path):
    """bot/spark/pip_extra.py as the action runs it: `python -I`, the standard library only, from any directory."""
    from bot.project.example import write_example

    write_example(tmp_path / "shop")

    def extra(*args: str) -> str:
        result = subprocess.run([sys.executable, "-I", str(ROOT / "bot/spark/pip_extra.py"), *args],
                                cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert extra("shop") == "spark"            # default_gateway: local
    assert extra("shop", "ci") == "connect"    # the team gateway: remote only
    assert extra("nowhere") == "spark"         # no config.yaml (or a config.py): the full one runs everything
    config = tmp_path / "shop" / "config.yaml"
    config.write_text(config.read_text().replace("default_gateway: local", "default_gateway: ci"))
    assert extra("shop") == "connect"
    config.write_text("gateways: {ci: {connection: {remote: 'sc://spark'}}}\n")
    assert extra("shop", "ci") == "spark"      # flow style: not read for certain


def _choose_install(tmp_path: Path, action_path: Path = ROOT, **settings: str) -> dict[str, str]:
    """The action's own `Choose meshbot's install` script, run by bash as the runner runs it: its outputs."""
    from bot.project.example import write_example

    if not (tmp_path / "work" / "shop").exists():
        write_example(tmp_path / "work" / "shop")
    step = next(s for s in _load(ROOT / "action.yml")["runs"]["steps"] if s.get("id") == "install")
    output = tmp_path / "output"
    output.unlink(missing_ok=True)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GITHUB_ACTION_PATH": str(action_path),
           "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp_path / "temp"), "RUNNER_OS": "Linux",
           "ImageOS": "ubuntu24", "MESHBOT_PROJECT_PATH": "shop", "PYTHON_FULL_VERSION": "3.11.9", **settings}
    result = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path / "work", env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in output.read_text().splitlines())


@pytest.mark.parametrize("command, pyspark, gateway, extra", [
    ("run-all", "auto", "ci", "connect"), ("run-all", "auto", "", "spark"), ("run", "spark", "ci", "spark"),
    ("authorize-deploy", "auto", "ci", "none"),
])
def test_the_install_step_keys_the_environment_on_the_extra(tmp_path, command, pyspark, gateway, extra):
    outputs = _choose_install(tmp_path, MESHBOT_PYSPARK=pyspark, MESHBOT_COMMAND=command, MESHBOT_GATEWAY=gateway)
    assert outputs["extra"] == extra
    assert outputs["venv"] == str(tmp_path / "temp" / "meshbot-venv")
    assert outputs["uv"] == str(tmp_path / "temp" / "meshbot-uv" / "bin" / "uv")
    assert outputs["save"] == "false", "MESHBOT_SAVE_VENV unset: not a default-branch event"
    version = re.escape(bot.__version__)   # the package's one version source (pyproject's version is dynamic)
    assert re.fullmatch(rf"meshbot-venv-Linux-ubuntu24-py3\.11\.9-{version}-{extra}-[0-9a-f]{{16}}", outputs["key"])


def test_the_environment_key_changes_with_the_lock_file_it_installs(tmp_path):
    """An environment installed from an older lock would be restored after the lock moved on: the key holds
    the lock file of the extra, and only that one (a new pyspark-client pin leaves a `spark` environment be)."""
    action = tmp_path / "action"
    (action / "bot" / "spark").mkdir(parents=True)
    shutil.copy(ROOT / "bot/spark/pip_extra.py", action / "bot/spark/pip_extra.py")
    shutil.copy(ROOT / "bot/__init__.py", action / "bot/__init__.py")   # the version the key holds
    shutil.copy(ROOT / "pyproject.toml", action / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", action / "requirements")
    settings = {"MESHBOT_PYSPARK": "auto", "MESHBOT_COMMAND": "run-all", "MESHBOT_GATEWAY": "ci"}
    first = _choose_install(tmp_path, action, **settings)
    assert first["extra"] == "connect" and first["lock"] == str(action / "requirements/connect.txt")
    with (action / "requirements/spark.txt").open("a") as lock:
        lock.write("# another pin\n")
    assert _choose_install(tmp_path, action, **settings)["key"] == first["key"]
    with (action / "requirements/connect.txt").open("a") as lock:
        lock.write("# another pin\n")
    assert _choose_install(tmp_path, action, **settings)["key"] != first["key"]
    assert _choose_install(tmp_path, action, **{**settings, "MESHBOT_COMMAND": "authorize-deploy"})["lock"] == \
        str(action / "requirements/base.txt")


@pytest.mark.parametrize("command, trusted_event, save", [
    ("run-all", "true", "true"), ("deploy-production", "true", "true"), ("run-all", "false", "false"),
    ("authorize-deploy", "true", "false"),   # installs the base alone and keeps nothing
])
def test_the_installed_environment_is_saved_only_from_the_default_branch_events(tmp_path, command, trusted_event,
                                                                                save):
    outputs = _choose_install(tmp_path, MESHBOT_PYSPARK="connect", MESHBOT_COMMAND=command, MESHBOT_GATEWAY="ci",
                              MESHBOT_SAVE_VENV=trusted_event)
    assert outputs["save"] == save


def test_action_runs_no_python_module_from_the_checkout():
    """`python -m pip` puts the working directory (the checkout) first on sys.path: a committed `pip/`
    package would run with the job's secrets before meshbot checks anything. Isolated mode (-I) does not."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    for step in steps:
        for line in str(step.get("run", "")).splitlines():
            if re.search(r"\bpython3? .*-m ", line):
                assert re.search(r"\bpython3? -I -m ", line), line


AUDITS_THAT_MUST_HOLD = {"dangerous-triggers", "unpinned-uses", "artipacked", "secrets-outside-env",
                         "template-injection", "excessive-permissions"}


def _zizmor(*args: str) -> list[dict]:
    binary = Path(sys.executable).with_name("zizmor")
    executable = str(binary) if binary.exists() else shutil.which("zizmor")
    assert executable, "zizmor is missing: pip install -e '.[test]' (it is in the test extra)"
    result = subprocess.run(
        [executable, "--offline", "--persona=auditor", "--format=json", "--no-progress", *args,
         "action.yml", ".github"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    # 0: no findings, 10-14: findings by highest severity; anything else is zizmor failing
    assert result.returncode in (0, 10, 11, 12, 13, 14), result.stderr
    return json.loads(result.stdout)


def _where(finding: dict) -> str:
    location = finding["locations"][0]
    path = location["symbolic"]["key"]["Local"]["verbatim_path"]
    return f"{path}:{location['concrete']['location']['start_point']['row'] + 1} {finding['ident']}"


def test_zizmor_finds_nothing():
    """The auditor persona (false positives allowed) on action.yml and .github/: none of the audits of
    issue 23 may report anything, and nothing else either."""
    findings = _zizmor()
    assert not [_where(f) for f in findings if f["ident"] in AUDITS_THAT_MUST_HOLD]
    assert not [_where(f) for f in findings]


def test_the_only_zizmor_ignore_is_the_reviewed_issue_comment_trigger():
    """zizmor 1.32 reports every issue_comment trigger; meshbot-deploy-command.yml ignores that one finding
    on its trigger line, with the reason beside it. Any other ignore would hide a finding."""
    ignores = [(path.name, line.strip()) for path in (ROOT / "action.yml", *WORKFLOWS)
               for line in path.read_text().splitlines() if "zizmor: ignore" in line]
    assert ignores == [("meshbot-deploy-command.yml",
                        "issue_comment:  # zizmor: ignore[dangerous-triggers] gated as explained above")]
    assert not (ROOT / ".github/zizmor.yml").exists() and not (ROOT / "zizmor.yml").exists()
    unignored = _zizmor("--no-ignores")
    assert [(f["ident"], Path(_where(f).split(":")[0]).name) for f in unignored] == \
        [("dangerous-triggers", "meshbot-deploy-command.yml")]


def test_the_deploy_commands_jobs_read_the_comment_of_the_pr_workflows_folder_and_gateway():
    """`/deploy`'s authorize job finds the bot's comment by its gateway marker: with another gateway (or
    folder) than the PR workflow's it would find none, and so no preview to check."""
    def inputs(workflow: dict) -> list[dict]:
        return [step.get("with", {}) for job in workflow["jobs"].values() for step in job.get("steps", [])
                if "meshbot/meshbot@" in str(step.get("uses", ""))]

    pr = [(w.get("project_path"), w.get("gateway")) for w in inputs(_workflow("meshbot-pr.yml"))]
    command = [(w.get("project_path"), w.get("gateway")) for w in inputs(_workflow("meshbot-deploy-command.yml"))]
    assert len(set(pr)) == 1 and command and set(command) == set(pr)
