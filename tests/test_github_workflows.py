"""action.yml and the workflows validate against the SchemaStore schemas; permissions and concurrency."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from github_support import GITHUB_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _schema(name: str) -> dict:
    return json.loads((GITHUB_FIXTURES / "schemas" / name).read_text())


def _load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text())
    if True in data:   # YAML 1.1 reads the `on:` key as a boolean; GitHub reads it as "on"
        data["on"] = data.pop(True)
    return data


def test_action_yml_is_valid_and_declares_the_issue_interface():
    action = _load(ROOT / "action.yml")
    jsonschema.validate(action, _schema("github-action.json"))
    assert action["runs"]["using"] == "composite"
    assert {"project_path", "gateway", "command", "github_token", "python_version", "extra_pip",
            "config"} <= set(action["inputs"])
    assert {"pr_environment_name", "created_pr_environment", "plan_id", "unit_tests", "required_approval",
            "prod_environment_synced"} <= set(action["outputs"])
    assert action["inputs"]["command"]["default"] == "run-all"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_are_valid_with_least_permissions(path):
    workflow = _load(path)
    jsonschema.validate(workflow, _schema("github-workflow.json"))
    permissions = workflow["permissions"]
    assert permissions.get("contents") == "read"
    assert not any(v == "write" for k, v in permissions.items() if k in ("contents", "actions", "packages"))


def test_user_workflows_cover_the_events_and_never_cancel_deploys():
    names = {p.name for p in WORKFLOWS}
    assert {"ci.yml", "meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml"} <= names
    pr = _load(ROOT / ".github/workflows/meshbot-pr.yml")
    assert {"pull_request", "pull_request_review", "issue_comment"} <= set(pr["on"])
    for name in ("meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml"):
        assert _load(ROOT / ".github/workflows" / name)["concurrency"]["cancel-in-progress"] is False
    release = _load(ROOT / ".github/workflows/meshbot-release.yml")
    assert release["jobs"]["promote"]["environment"]["name"] == "production"
    assert _load(ROOT / ".github/workflows/meshbot-deploy.yml")["jobs"]["deploy"]["environment"]["name"] == "production"
    assert set(release["on"]) == {"release"}, "a release published from a new tag must deploy once, not twice"
    assert "bash .ci/run" in (ROOT / ".github/workflows/ci.yml").read_text()


def _secrets_of(workflow: dict) -> set[str]:
    text = json.dumps(workflow)
    return {name for name in re.findall(r"secrets\.([A-Z_]+)", text) if name != "GITHUB_TOKEN"}


def test_shipped_workflows_use_the_team_gateway_with_every_secret_it_reads():
    """The workflows run the example's `ci` gateway as shipped: every env_var it reads is set from a
    secret or variable, and README and workflows name the same action reference and secrets."""
    config = (ROOT / "bot/project/example/config.yaml").read_text()
    ci_block = config[config.index("  ci:"):config.index("default_gateway")]
    needed = set(re.findall(r"env_var\('([A-Z_]+)'", ci_block))
    assert {"MESHBOT_SPARK_REMOTE", "MESHBOT_STATE_PASSWORD"} <= needed
    readme = (ROOT / "README.md").read_text()
    references = set(re.findall(r"uses: (\S+/meshbot@\S+)", readme))
    for name in ("meshbot-pr.yml", "meshbot-deploy.yml", "meshbot-release.yml"):
        workflow = _load(ROOT / ".github/workflows" / name)
        job = next(iter(workflow["jobs"].values()))
        assert needed <= set(job["env"]), (name, needed - set(job["env"]))
        step = next(s for s in job["steps"] if "meshbot@" in s.get("uses", ""))
        assert step["with"]["gateway"] == "ci" and references == {step["uses"]}, (name, references)
        assert _secrets_of(workflow) <= set(re.findall(r"`(MESHBOT_[A-Z_]+)`", readme)), name


def test_action_cache_key_changes_with_meshbot_python_and_project_files():
    """A key of the project's files alone would hit a cache written by an older meshbot forever."""
    steps = _load(ROOT / "action.yml")["runs"]["steps"]
    key_step = next(s for s in steps if s.get("id") == "cache-key")
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache@"))
    assert steps.index(key_step) < steps.index(cache)
    assert cache["with"]["path"].endswith("/.meshbot/cache")
    assert cache["with"]["key"].startswith("${{ steps.cache-key.outputs.prefix }}")
    assert cache["with"]["restore-keys"] == "${{ steps.cache-key.outputs.prefix }}"
    for pattern in ("*.sql", "*.py", "*.y*ml", "*.csv"):
        assert pattern in cache["with"]["key"]
    assert "PYTHON_VERSION" in key_step["run"] and "GITHUB_ACTION_PATH" in key_step["run"]
    assert "python_version" in key_step["env"]["PYTHON_VERSION"]
